"""Tab completion for the REPL: keywords, MATCH_RECOGNIZE words, functions, tables,
streams and columns, read from the connection's own catalog.

The catalog (DuckDB's keywords, functions, tables, views and their columns,
and the live streams of the database) is read on the first completion after
a statement ran, so a table created a moment ago completes at once, and the
catalog is not queried at every key press. After ``name.`` only the columns
of the table, view or stream ``name`` (or of the table an alias in the
statement stands for) are offered; elsewhere columns of the tables the
statement names come before the other words. A lowercase prefix gets
lowercase keywords. A line starting with ``.`` completes dot-commands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from matchsql.api.connection import Connection
from matchsql.cli.dot_commands import COMMANDS
from matchsql.cli.vocabulary import (
    MATCH_RECOGNIZE_FUNCTIONS,
    MATCH_RECOGNIZE_WORDS,
    STATEMENT_WORDS,
)
from matchsql.config import is_internal

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_QUALIFIED = re.compile(r"([A-Za-z_][A-Za-z0-9_$]*)\.([A-Za-z0-9_$]*)$")
_PREFIX = re.compile(r"[A-Za-z0-9_$]*$")
_FROM_ALIAS = re.compile(
    r"\b(?:FROM|JOIN)\s+([A-Za-z_][\w$]*)(?:\s+(?:AS\s+)?([A-Za-z_][\w$]*))?", re.IGNORECASE
)


@dataclass
class Catalog:
    """What can be completed, read once per statement."""

    keywords: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    columns: dict[str, list[str]] = field(default_factory=dict)  # lowercase relation -> names


def read_words(con: Connection) -> tuple[list[str], list[str]]:
    """DuckDB's keywords (uppercase) and function names; read once per session."""
    duck = con.duckdb.cursor()
    try:
        keywords = [
            r[0].upper()
            for r in duck.execute(
                "SELECT DISTINCT keyword_name FROM duckdb_keywords() ORDER BY keyword_name"
            ).fetchall()
        ]
        functions = [
            r[0]
            for r in duck.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_type IN ('scalar', 'aggregate', 'table', 'macro', 'table_macro') "
                "AND function_name NOT LIKE '\\_\\_%' ESCAPE '\\' ORDER BY function_name"
            ).fetchall()
        ]
    finally:
        duck.close()
    return keywords, functions


def read_catalog(con: Connection, words: tuple[list[str], list[str]]) -> Catalog:
    """The completion words of ``con``: ``words`` (:func:`read_words`), its tables,
    views and their columns, and matchsql's streams."""
    duck = con.duckdb.cursor()
    try:
        columns: dict[str, list[str]] = {}
        tables: list[str] = []
        for table, column in duck.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "ORDER BY table_name, ordinal_position"
        ).fetchall():
            if is_internal(table):
                continue
            if table.lower() not in columns:
                tables.append(table)
            columns.setdefault(table.lower(), []).append(column)
    finally:
        duck.close()
    streams: list[str] = []
    result = con.sql("SHOW STREAMS")
    for name, spec, *_ in result.fetchall() if result is not None else []:
        streams.append(name)
        columns[name.lower()] = [part.split()[0] for part in spec.split(", ") if part.strip()]
    return Catalog(words[0], words[1], tables, streams, columns)


class SqlCompleter(Completer):
    """Completes the word before the cursor from :class:`Catalog` (``catalog()`` gives it)."""

    def __init__(self, catalog: Callable[[], Catalog]) -> None:
        self._catalog = catalog

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        before = document.text_before_cursor
        line = document.current_line_before_cursor
        if line.lstrip().startswith(".") and " " not in line.strip() and "\n" not in before:
            yield from _dot_commands(line.strip())
            return
        catalog = self._catalog()
        qualified = _QUALIFIED.search(before)
        if qualified:
            owner, prefix = qualified.groups()
            relation = _aliases(document.text).get(owner.lower(), owner.lower())
            yield from _matching(catalog.columns.get(relation, []), prefix, "column")
            return
        prefix = _PREFIX.search(before).group(0)  # type: ignore[union-attr]  # matches "" at least
        if not prefix:
            return
        named = _unique(
            c for r in set(_aliases(document.text).values()) for c in catalog.columns.get(r, [])
        )
        yield from _matching(named, prefix, "column")
        yield from _matching(catalog.tables, prefix, "table")
        yield from _matching(catalog.streams, prefix, "stream")
        yield from _matching(MATCH_RECOGNIZE_WORDS, prefix, "MATCH_RECOGNIZE", fold=True)
        yield from _matching(MATCH_RECOGNIZE_FUNCTIONS, prefix, "pattern function", fold=True)
        yield from _matching(STATEMENT_WORDS, prefix, "matchsql", fold=True)
        taken = {
            w.lower()
            for w in (*MATCH_RECOGNIZE_WORDS, *MATCH_RECOGNIZE_FUNCTIONS, *STATEMENT_WORDS)
        }
        yield from _matching(
            (w for w in catalog.keywords if w.lower() not in taken), prefix, "keyword", fold=True
        )
        taken |= {w.lower() for w in catalog.keywords}  # a word offered once (try_cast)
        yield from _matching(
            (f for f in catalog.functions if f.lower() not in taken), prefix, "function", fold=True
        )
        others = {n.lower() for n in named}
        yield from _matching(
            _unique(
                c for cols in catalog.columns.values() for c in cols if c.lower() not in others
            ),
            prefix,
            "column",
        )


def _dot_commands(typed: str) -> Iterator[Completion]:
    for name in sorted(COMMANDS):
        if ("." + name).startswith(typed):
            yield Completion(
                "." + name, start_position=-len(typed), display_meta=COMMANDS[name].help
            )


def _matching(
    words: Iterable[str], prefix: str, meta: str, fold: bool = False
) -> Iterator[Completion]:
    """The words starting with ``prefix`` (any case); with ``fold`` they take the case
    the prefix was typed in (lowercase for a lowercase prefix)."""
    lowered = prefix.lower()
    for word in words:
        if word.lower().startswith(lowered) and word.lower() != lowered:
            text = word.lower() if fold and prefix.islower() else word
            yield Completion(text, start_position=-len(prefix), display_meta=meta)


def _aliases(text: str) -> dict[str, str]:
    """Relation names and aliases of ``FROM x [AS] a`` / ``JOIN x a`` -> the relation."""
    found: dict[str, str] = {}
    for relation, alias in _FROM_ALIAS.findall(text):
        found[relation.lower()] = relation.lower()
        if alias and alias.upper() not in _NOT_ALIASES:
            found[alias.lower()] = relation.lower()
    return found


_NOT_ALIASES = frozenset(
    {
        "MATCH_RECOGNIZE",
        "WHERE",
        "GROUP",
        "ORDER",
        "LIMIT",
        "JOIN",
        "ON",
        "USING",
        "LEFT",
        "RIGHT",
        "INNER",
        "OUTER",
        "FULL",
        "CROSS",
        "NATURAL",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "HAVING",
        "WINDOW",
        "QUALIFY",
        "AS",
    }
)


def _unique(words: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for word in words:
        if word.lower() not in seen:
            seen.add(word.lower())
            out.append(word)
    return out
