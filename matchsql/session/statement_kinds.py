"""The kinds of statement a session runs, and the one step that splits a text into them.

A text is split once (:func:`split`): by DuckDB's own parser when it accepts
the whole text (plain SQL: no MATCH_RECOGNIZE, no matchsql statement), else
by the matchsql dialect's tokenizer, loaded only then. Each piece is then
classified once (:func:`classify`), over DuckDB's tokenizer, into one of the
kinds below; the executor dispatches each kind from one table. Strings,
quoted names and comments are single tokens, so ``'match_recognize'`` or
``-- match_recognize`` never make a statement look like one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import duckdb

from matchsql.config import Config
from matchsql.grammar.sqltext import split_statements
from matchsql.session.duckdb_tokens import (
    STRING,
    Token,
    leading_words,
    tokens,
)
from matchsql.session.literals import literal
from matchsql.session.view_statement import CreateView, create_view, view_words

if TYPE_CHECKING:  # their parsers load the matchsql dialect: only where such a statement is
    from matchsql.grammar.continuous_ddl import ContinuousStatement
    from matchsql.grammar.stream_ddl import StreamStatement

__all__ = [
    "READS_TABLES",
    "ContinuousDdl",
    "Deallocate",
    "DefineView",
    "Execute",
    "ExplainMatch",
    "MatchQuery",
    "Piece",
    "Prepare",
    "Query",
    "ResetSetting",
    "SetSetting",
    "ShowSetting",
    "ShowStats",
    "ShowWorkers",
    "Sql",
    "Statement",
    "StreamDdl",
    "classify",
    "replace_settings",
    "split",
]

# -- the statement kinds ------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One statement of a text: its own text and where it starts in the whole text."""

    text: str
    offset: int


@dataclass(frozen=True)
class Query(Statement):
    """A statement that goes to DuckDB, as written or after matchsql rewrote it."""

    words: tuple[str, ...]  # its first keywords, upper case
    type: duckdb.StatementType | None = None  # DuckDB's, where its parser split the text
    expanded: bool = False  # MATCH_RECOGNIZE views and settings already put in
    head: int = 0  # where the statement that EXPLAIN [ANALYZE] explains starts; 0: no EXPLAIN


@dataclass(frozen=True)
class Sql(Query):
    """Plain SQL: DuckDB runs it verbatim."""


@dataclass(frozen=True)
class MatchQuery(Query):
    """A statement with a MATCH_RECOGNIZE and/or a window with row pattern recognition."""

    match: bool = True  # a MATCH_RECOGNIZE token
    windowed: bool = False  # a WINDOW with PATTERN (...)


@dataclass(frozen=True)
class ExplainMatch(MatchQuery):
    """``EXPLAIN [ANALYZE]`` of a :class:`MatchQuery`: the matcher's plan (and timings)."""

    analyze: bool = False


@dataclass(frozen=True)
class StreamDdl(Statement):
    """CREATE/DROP STREAM, SHOW STREAMS, SHOW STREAM READERS."""

    node: StreamStatement


@dataclass(frozen=True)
class ContinuousDdl(Statement):
    """CREATE/RESUME/STOP/DROP CONTINUOUS QUERY, SHOW CONTINUOUS QUERIES."""

    node: ContinuousStatement


@dataclass(frozen=True)
class ShowStats(Statement):
    """``SHOW STATS``: the input metrics of the last continuous query."""


@dataclass(frozen=True)
class ShowWorkers(Statement):
    """``SHOW WORKERS``: the worker processes of ``SET workers = N``."""


@dataclass(frozen=True)
class SetSetting(Statement):
    """``SET [SESSION] name = value`` of a matchsql setting."""

    name: str
    value: str


@dataclass(frozen=True)
class ShowSetting(Statement):
    name: str


@dataclass(frozen=True)
class ResetSetting(Statement):
    name: str


@dataclass(frozen=True)
class Prepare(Statement):
    """``PREPARE name AS body``: kept by matchsql when the body has a MATCH_RECOGNIZE."""

    name: str  # lower case
    body: str
    body_offset: int  # in ``text``


@dataclass(frozen=True)
class Execute(Statement):
    """``EXECUTE name [(values)]``."""

    name: str  # lower case
    arguments: str  # the text after the name, as written
    arguments_offset: int  # in ``text``


@dataclass(frozen=True)
class Deallocate(Statement):
    """``DEALLOCATE [PREPARE] name``."""

    name: str  # lower case


@dataclass(frozen=True)
class DefineView(Statement):
    """``CREATE [OR REPLACE] [TEMP] VIEW ...``: matchsql stores it where its query has a
    MATCH_RECOGNIZE (see matchsql.session.views), DuckDB otherwise. ``view``: its parts
    (matchsql.session.view_statement); None where they are not where matchsql looks, and
    DuckDB runs it."""

    view: CreateView | None = None


# -- splitting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One statement's text (no ``;``), its offset, and DuckDB's type where DuckDB split it."""

    text: str
    offset: int
    type: duckdb.StatementType | None = None


def split(text: str, con: duckdb.DuckDBPyConnection) -> list[Piece]:
    """The statements of ``text``, split once, by matchsql's one splitter
    (:func:`matchsql.grammar.sqltext.split_statements`: no parser is loaded for it).

    DuckDB's parser adds each statement's type where it accepts the whole text
    (plain SQL, and the matchsql statements shaped like DuckDB's, SET, SHOW)
    and finds as many statements; it rejects MATCH_RECOGNIZE and the stream
    and continuous query statements, whose pieces then have no type.
    """
    found = split_statements(text)
    try:
        extracted = con.extract_statements(text)
    except duckdb.Error:
        extracted = None
    if extracted is not None and len(extracted) == len(found):
        return [Piece(t, o, s.type) for (t, o), s in zip(found, extracted)]
    return [Piece(t, o) for t, o in found]


# -- classifying ----------------------------------------------------------------------------

#: Statements that read tables: a MATCH_RECOGNIZE view or a row pattern window may stand
#: in them. DESCRIBE and SHOW read a view's columns from DuckDB; others (PRAGMA, ATTACH,
#: ...) name no query.
READS_TABLES = frozenset(
    {
        "SELECT",
        "WITH",
        "FROM",
        "VALUES",
        "TABLE",
        "PIVOT",
        "UNPIVOT",
        "INSERT",
        "CREATE",
        "UPDATE",
        "DELETE",
        "COPY",
        "EXPLAIN",
    }
)
_STREAM_HEADS = (("CREATE", "STREAM"), ("DROP", "STREAM"), ("SHOW", "STREAMS"), ("SHOW", "STREAM"))
_CONTINUOUS_HEADS = (
    ("CREATE", "CONTINUOUS", "QUERY"),
    ("RESUME", "CONTINUOUS", "QUERY"),
    ("STOP", "CONTINUOUS", "QUERY"),
    ("DROP", "CONTINUOUS", "QUERY"),
    ("SHOW", "CONTINUOUS", "QUERIES"),
)
_SETTINGS = frozenset(Config.names())


def classify(piece: Piece) -> Statement:
    """The kind of ``piece``, with its parts (errors located in ``piece.text``)."""
    text, offset = piece.text, piece.offset
    found = tokens(text)
    words = leading_words(found)
    head = tuple(words[:3])
    if head == ("SHOW", "STATS") and len(found) == 2:
        return ShowStats(text, offset)
    if head == ("SHOW", "WORKERS") and len(found) == 2:
        return ShowWorkers(text, offset)
    if head[:2] in _STREAM_HEADS or head in _CONTINUOUS_HEADS:
        # The matchsql dialect (sqlglot) parses them: loaded for such statements only
        # (start-up), not to dodge an import cycle.
        from matchsql.grammar.statements import parsed

        node = parsed(text)[0]
        if head[:2] in _STREAM_HEADS:
            # what the dialect parses these heads as
            return StreamDdl(text, offset, cast("StreamStatement", node))
        return ContinuousDdl(text, offset, cast("ContinuousStatement", node))
    setting = _setting(text, offset, found, words)
    if setting is not None:
        return setting
    first = words[:1]
    if first == ["PREPARE"] and words[2:3] == ["AS"]:
        start = found[3].start if len(found) > 3 else len(text)
        return Prepare(text, offset, words[1].lower(), text[start:], start)
    if first == ["EXECUTE"] and len(words) > 1:
        start = found[2].start if len(found) > 2 else len(text)
        return Execute(text, offset, words[1].lower(), text[start:], start)
    if first == ["DEALLOCATE"] and len(words) > 1:
        name = words[2] if words[1] == "PREPARE" and len(words) > 2 else words[1]
        return Deallocate(text, offset, name.lower())
    view_head = view_words(words)
    if view_head is not None:
        return DefineView(text, offset, create_view(text, found, view_head))
    return query(text, offset, piece.type, found, words)


def query(
    text: str,
    offset: int,
    kind: duckdb.StatementType | None = None,
    found: list[Token] | None = None,
    words: list[str] | None = None,
    expanded: bool = False,
) -> Query:
    """The :class:`Query` kind of ``text``: plain SQL, or one matchsql runs."""
    found = tokens(text) if found is None else found
    words = leading_words(found) if words is None else words
    head = tuple(words[:3])
    # MATCH_RECOGNIZE is a reserved word: DuckDB would take ``t MATCH_RECOGNIZE`` for an
    # alias, matchsql reports the missing clause. A statement that DuckDB's parser
    # accepted has no row pattern window.
    match = any(t.word == "MATCH_RECOGNIZE" for t in found)
    windowed = kind is None and _windowed(found)
    explained = 0
    analyze = False
    if words[:1] == ["EXPLAIN"]:
        analyze = words[1:2] == ["ANALYZE"]
        at = 1 + analyze
        explained = found[at].start if len(found) > at else len(text)
    if not (match or windowed):
        return Sql(text, offset, head, kind, expanded, explained)
    if explained:
        return ExplainMatch(text, offset, head, kind, expanded, explained, match, windowed, analyze)
    return MatchQuery(text, offset, head, kind, expanded, explained, match, windowed)


def _windowed(found: list[Token]) -> bool:
    """Whether a WINDOW clause comes before a ``PATTERN (``: a row pattern window."""
    window = False
    for i, token in enumerate(found):
        word = token.word
        if word == "WINDOW":
            window = True
        elif window and word == "PATTERN" and i + 1 < len(found) and found[i + 1].text == "(":
            return True
    return False


def _setting(text: str, offset: int, found: list[Token], words: list[str]) -> Statement | None:
    """SET, SHOW or RESET of a matchsql setting; None for any other statement."""
    if words[:1] == ["SET"]:
        at = 2 if words[1:2] == ["SESSION"] else 1
        if len(found) < at + 3 or found[at].word is None or found[at].text.lower() not in _SETTINGS:
            return None
        sign = found[at + 1]
        if sign.text != "=" and sign.word != "TO":
            return None
        value = text[found[at + 2].start :].strip()
        return SetSetting(text, offset, found[at].text.lower(), _unquote(value))
    if (
        words[:1] in (["SHOW"], ["RESET"])
        and len(found) == 2
        and len(words) == 2
        and words[1].lower() in _SETTINGS
    ):
        kind = ShowSetting if words[0] == "SHOW" else ResetSetting
        return kind(text, offset, words[1].lower())
    return None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def replace_settings(sql: str, values: dict[str, object]) -> str:
    """``sql`` with each ``current_setting('name')`` of a setting in ``values`` replaced by
    its value as a literal (DuckDB answers for its own settings)."""
    found = tokens(sql)
    spans: list[tuple[int, int, str]] = []
    for i in range(len(found) - 3):
        name, left, arg, right = found[i : i + 4]
        if (
            name.text.lower() == "current_setting"
            and left.text == "("
            and arg.kind == STRING
            and arg.text.startswith("'")
            and right.text == ")"
        ):
            setting = arg.text[1:-1].replace("''", "'").lower()
            if setting in values:
                spans.append((name.start, right.end, literal(values[setting])))
    for start, end, text in reversed(spans):
        sql = sql[:start] + text + sql[end:]
    return sql
