"""The record every conformance case is written as, and helpers that build them.

A case is data: the SQL that creates its (tiny) input, one query, and either
the expected rows (derived by hand, the reasoning in ``why``) or the error
class the query must raise. Keeping cases as data makes the suite easy to
count, to read side by side with the documentation, and to replay through
other execution paths or the oracle.

Two families of helpers keep the many small pattern cases readable:

* *letter tables* (``letters("aab")``): table ``s(id, v)`` with one row per
  character, so that ``DEFINE A AS v = 'a'`` turns a row pattern into
  something as easy to reason about as a regular expression over a string;
* compact expectations: ``one("1:1-2 2:4-4")`` for ONE ROW PER MATCH output
  ``(match_number, first id, last id)`` and ``rows("1A 2B | 4A")`` for ALL
  ROWS PER MATCH output ``(id, match_number, classifier)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import matchsql


@dataclass(frozen=True)
class Case:
    """One conformance case.

    ``expected`` is the full result as a list of tuples, or a subclass of
    :class:`matchsql.Error` that running the query must raise. ``ordered``
    is False only where the outer query cannot fix an order (never for the
    MATCH_RECOGNIZE cases, which all end with an ORDER BY). ``columns``, when
    given, is the expected list of output column names (output shape cases).
    """

    name: str
    setup: tuple[str, ...]
    query: str
    expected: list[tuple] | type[matchsql.Error]
    why: str = ""
    ordered: bool = True
    tags: tuple[str, ...] = field(default_factory=tuple)
    columns: tuple[str, ...] | None = None  # expected output column names, when checked


def table(name: str, columns: str, rows: list[tuple] | str) -> tuple[str, ...]:
    """Statements that create ``name(columns)`` and insert ``rows``.

    ``rows`` is either SQL text for VALUES or a list of Python tuples whose
    items are rendered as SQL literals (None as NULL, str quoted).
    """
    stmts = [f"CREATE TABLE {name} ({columns})"]
    if isinstance(rows, str):
        if rows.strip():
            stmts.append(f"INSERT INTO {name} VALUES {rows}")
    elif rows:
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        stmts.append(f"INSERT INTO {name} VALUES {values}")
    return tuple(stmts)


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def letters(seq: str, name: str = "s") -> tuple[str, ...]:
    """Table ``name(id INTEGER, v VARCHAR)``: row ``i`` (from 1) holds the i-th character.

    A ``.`` in ``seq`` stands for a NULL ``v``.
    """
    return table(
        name, "id INTEGER, v VARCHAR", [(i, None if c == "." else c) for i, c in enumerate(seq, 1)]
    )


def partitioned_letters(parts: dict[str, str], name: str = "s") -> tuple[str, ...]:
    """Table ``name(p VARCHAR, id INTEGER, v VARCHAR)``; ids run on across partitions."""
    rows: list[tuple] = []
    next_id = 1
    for key, seq in parts.items():
        for c in seq:
            rows.append((key, next_id, c))
            next_id += 1
    return table(name, "p VARCHAR, id INTEGER, v VARCHAR", rows)


LETTER_VARIABLES = "ABCDE"


def letter_defines(pattern: str, undefined: str = "") -> str:
    """DEFINE list ``X AS v = 'x'`` for every letter variable A-E used in ``pattern``.

    Variables outside A-E (and those in ``undefined``) get no definition, so
    they are true for every row.
    """
    used = sorted(set(re.findall(r"\b([A-E])\b", pattern.replace("PERMUTE", " "))))
    defs = [f"{v} AS v = '{v.lower()}'" for v in used if v not in undefined]
    return ", ".join(defs)


def one_query(
    pattern: str,
    *,
    skip: str = "PAST LAST ROW",
    undefined: str = "",
    defines: str | None = None,
    table_name: str = "s",
) -> str:
    """ONE ROW PER MATCH over a letter table: ``(mn, first id, last id)`` per match."""
    defs = defines if defines is not None else letter_defines(pattern, undefined)
    return (
        f"SELECT mn, fid, lid FROM {table_name} MATCH_RECOGNIZE (\n"
        f"  ORDER BY id\n"
        f"  MEASURES MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        f"  ONE ROW PER MATCH\n"
        f"  AFTER MATCH SKIP {skip}\n"
        f"  PATTERN ({pattern})\n"
        f"  DEFINE {defs}\n"
        f") ORDER BY mn"
    )


def all_query(
    pattern: str,
    *,
    skip: str = "PAST LAST ROW",
    mode: str = "",
    undefined: str = "",
    defines: str | None = None,
) -> str:
    """ALL ROWS PER MATCH over a letter table: ``(id, mn, classifier)`` per output row."""
    defs = defines if defines is not None else letter_defines(pattern, undefined)
    order = "id, mn" if "UNMATCHED" in mode else "mn, id"
    return (
        f"SELECT id, mn, cls FROM s MATCH_RECOGNIZE (\n"
        f"  ORDER BY id\n"
        f"  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls\n"
        f"  ALL ROWS PER MATCH {mode}\n"
        f"  AFTER MATCH SKIP {skip}\n"
        f"  PATTERN ({pattern})\n"
        f"  DEFINE {defs}\n"
        f") ORDER BY {order}"
    )


def one(spec: str) -> list[tuple]:
    """``"1:1-2 2:4-4 3:-"`` -> ``[(1, 1, 2), (2, 4, 4), (3, None, None)]``
    (``-`` = empty match)."""
    out: list[tuple] = []
    for token in spec.split():
        mn, span = token.split(":")
        if span == "-":
            out.append((int(mn), None, None))
        else:
            lo, hi = span.split("-")
            out.append((int(mn), int(lo), int(hi)))
    return out


def rows(spec: str, *, first_match: int = 1) -> list[tuple]:
    """``"1A 2B | 4A | 5-"`` -> ``(id, mn, classifier)`` rows; ``|`` separates matches.

    ``5-`` is the output row of an empty match starting at row 5 (classifier
    NULL). ``7~`` is an unmatched row (match number and classifier NULL) and
    does not consume a match number. A part that is just ``#`` is a match
    that consumed a number but produced no row (an omitted empty match, or a
    match whose rows are all excluded).
    """
    out: list[tuple] = []
    mn = first_match
    for part in spec.split("|"):
        tokens = part.split()
        if tokens == ["#"]:  # a match (empty, omitted) that produced no row
            mn += 1
            continue
        if not tokens:
            continue
        consumed = False
        for token in tokens:
            m = re.fullmatch(r"(\d+)([A-Z]+|-|~)", token)
            assert m, token
            rid, label = int(m.group(1)), m.group(2)
            if label == "~":
                out.append((rid, None, None))
            else:
                out.append((rid, mn, None if label == "-" else label))
                consumed = True
        if consumed:
            mn += 1
    return out
