"""Box tables for the CLI, drawn from a stream of Arrow batches.

DuckDB's own relation printing needs the whole result as one relation and
only shows "? rows" for a stream. Results here are streams that can be
huge (``ALL MATCHES`` output, live streams), so this module keeps only the
first and last rows it will show, counts the rest as they go by, and draws
a box in DuckDB's style with the true row count in the footer. Values are
turned into text by DuckDB itself (a cast to VARCHAR), so they read exactly
as in DuckDB.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import duckdb
from wcwidth import wcswidth

from matchsql.results.duckdb_values import shared

if TYPE_CHECKING:
    import pyarrow as pa

NULL = "NULL"
ELLIPSIS = "…"
DOT = "·"
MAX_COLUMN_WIDTH = 40


@dataclass
class Collected:
    """The rows a box will show: a head, a tail, and how many rows there were in all."""

    schema: pa.Schema
    head: pa.Table
    tail: pa.Table | None  # None when every row is in ``head``
    total: int


def collect(schema: pa.Schema, batches: Iterable[pa.RecordBatch], max_rows: int) -> Collected:
    """Consume ``batches``, keeping the first and last rows to show (all if ``max_rows`` <= 0)."""
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    head: list[pa.RecordBatch] = []
    tail: list[pa.RecordBatch] = []
    kept = tail_rows = total = 0
    for batch in batches:
        total += batch.num_rows
        if max_rows <= 0 or kept < max_rows:
            take = batch.num_rows if max_rows <= 0 else min(batch.num_rows, max_rows - kept)
            head.append(batch.slice(0, take))
            kept += take
            batch = batch.slice(take)
        if batch.num_rows:
            tail.append(batch)
            tail_rows += batch.num_rows
            while tail and tail_rows - tail[0].num_rows >= max_rows:
                tail_rows -= tail.pop(0).num_rows
    head_table = pa.Table.from_batches(head, schema=schema)
    if max_rows <= 0 or total <= max_rows:
        return Collected(schema, head_table, None, total)
    # More rows than fit: show the first half and the last half, as DuckDB does.
    # The tail keeps at least ``max_rows`` rows once it has dropped any, so the
    # last rows lie in it; with fewer than 2 * max_rows in all some of them are
    # still in the head, which the tail then directly continues.
    rest = pa.Table.from_batches(head + tail, schema=schema)
    first = (max_rows + 1) // 2
    last = max_rows - first
    return Collected(schema, head_table.slice(0, first), rest.slice(rest.num_rows - last), total)


def render_batches(
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    *,
    max_rows: int = 40,
    max_width: int | None = None,
    types: list[str] | None = None,
) -> str:
    """Consume ``batches`` and draw them as a box table (``types``: the DuckDB type names
    of the columns, where the statement knows them; else those DuckDB reads from Arrow)."""
    if is_explain(list(schema.names)):
        import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow

        table = pa.Table.from_batches(list(batches), schema=schema)
        return explain_text(
            list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
        )
    return render_collected(collect(schema, batches, max_rows), max_width=max_width, types=types)


def render_collected(
    data: Collected, *, max_width: int | None = None, types: list[str] | None = None
) -> str:
    """Draw collected rows as a box table with a row-count footer."""
    names = list(data.schema.names)
    if not names:
        return _rows_label(data.total, None)
    read, head = as_text(data.head)
    types = [t.lower() for t in types] if types is not None else read
    tail = as_text(data.tail)[1] if data.tail is not None else None
    right = [numeric(t) for t in data.schema.types]
    return _box(names, types, right, head, tail, data.total, max_width)


#: DuckDB's types that Arrow reads as integer, floating point or decimal (see numeric).
_NUMERIC = frozenset(
    {
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
        "float",
        "double",
        "decimal",
    }
)


def render_relation(
    relation: duckdb.DuckDBPyRelation, *, max_rows: int = 40, max_width: int | None = None
) -> str:
    """Read ``relation`` and draw it as :func:`render_batches` would draw its Arrow batches:
    DuckDB casts the values to text in the same query, so no row is read as Arrow."""
    names = list(relation.columns)
    if is_explain(names):
        return explain_text(relation.fetchall())
    types = [str(t).lower() for t in relation.types]
    if not names:
        return _rows_label(len(relation.fetchall()), None)
    texts = relation.project(", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(len(names))))
    head: list[tuple[str | None, ...]] = []
    last: collections.deque[tuple[str | None, ...]] = collections.deque(
        maxlen=max(max_rows, 0) or None
    )
    total = 0
    for row in texts.iter_rows(2048):
        total += 1
        if max_rows <= 0 or len(head) < max_rows:
            head.append(row)
        if max_rows > 0:
            last.append(row)
    tail = None
    if 0 < max_rows < total:  # the first half and the last half, as DuckDB does
        first = (max_rows + 1) // 2
        head, tail = head[:first], list(last)[len(last) - (max_rows - first) :]
    right = [t.split("(")[0] in _NUMERIC for t in types]
    return _box(names, types, right, head, tail, total, max_width)


#: The columns of an EXPLAIN's rows: DuckDB's (a key and the plan) and matchsql's.
_EXPLAIN_COLUMNS = (["explain_key", "explain_value"], ["explain"])


def is_explain(names: list[str]) -> bool:
    """True for the rows of an EXPLAIN, which are shown as text, not as a box."""
    return names in _EXPLAIN_COLUMNS


def explain_text(rows: list[tuple]) -> str:
    """An EXPLAIN's rows as its plan text, whole (as DuckDB's CLI prints a plan): a box
    would cut every line at the width of a column and turn line breaks into ``\\n``."""
    return "\n".join(str(row[-1]).rstrip("\n") for row in rows if row[-1] is not None)


def _box(
    names: list[str],
    types: list[str],
    right: list[bool],
    head: list[tuple[str | None, ...]],
    tail: list[tuple[str | None, ...]] | None,
    total: int,
    max_width: int | None,
) -> str:
    columns = [
        _Column(name, type_, [row[i] for row in head], [row[i] for row in tail or []], right[i])
        for i, (name, type_) in enumerate(zip(names, types))
    ]
    shown = _fit(columns, max_width)
    lines = _draw(shown, tail is not None)
    footer = [_rows_label(total, len(head) + len(tail or []) if tail is not None else None)]
    visible = sum(1 for c in shown if c is not ELLIPSIS_COLUMN)
    if visible < len(columns):
        footer.append(f"{len(columns)} columns ({visible} shown)")
    return "\n".join(lines + ["  " + "   ".join(footer)])


def _rows_label(total: int, shown: int | None) -> str:
    label = f"{total:,} row" + ("" if total == 1 else "s")
    return label + (f" ({shown} shown)" if shown is not None else "")


def _cast(
    con: duckdb.DuckDBPyConnection, table: pa.Table
) -> tuple[list[str], list[tuple[str | None, ...]]]:
    con.register("rows_to_render", table)
    try:
        types = [str(t).lower() for t in con.table("rows_to_render").types]
        if not table.num_rows:
            return types, []
        casts = ", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(table.num_columns))
        return types, con.execute(f"SELECT {casts} FROM rows_to_render").fetchall()
    finally:
        con.unregister("rows_to_render")


def as_text(table: pa.Table) -> tuple[list[str], list[tuple[str | None, ...]]]:
    """DuckDB type names and DuckDB's text for every value of ``table``."""
    return shared.run(lambda con: _cast(con, table))


def numeric(type_: pa.DataType) -> bool:
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    return pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_)


@dataclass
class _Column:
    name: str
    type_: str
    head: list[str | None]
    tail: list[str | None]
    right: bool

    @cached_property
    def width(self) -> int:
        cells = [_cell(self.name), self.type_, *map(_cell, self.head), *map(_cell, self.tail)]
        return min(max(_width(c) for c in cells), MAX_COLUMN_WIDTH)


ELLIPSIS_COLUMN = _Column(ELLIPSIS, ELLIPSIS, [], [], False)


def _cell(value: str | None) -> str:
    if value is None:
        return NULL
    return value.replace("\n", "\\n").replace("\r", "\\r").replace("\t", " ")


def _width(text: str) -> int:
    width = wcswidth(text)
    return len(text) if width < 0 else width


def _fit(columns: list[_Column], max_width: int | None) -> list[_Column]:
    """The columns that fit in ``max_width``: outer ones first, a ``…`` column for the rest."""

    def total(cols: list[_Column]) -> int:
        return sum(c.width + 3 for c in cols) + 1

    if max_width is None or total(columns) <= max_width:
        return columns
    left: list[_Column] = []
    right: list[_Column] = []
    budget = max_width - (1 + 3) - 1  # the … column and the closing border
    lo, hi = 0, len(columns) - 1
    take_left = True
    while lo <= hi:
        column = columns[lo] if take_left else columns[hi]
        if column.width + 3 > budget:
            break
        budget -= column.width + 3
        if take_left:
            left.append(column)
            lo += 1
        else:
            right.insert(0, column)
            hi -= 1
        take_left = not take_left
    if not left:  # not even one column fits: show the first one anyway
        left = [columns[0]]
    return left + [ELLIPSIS_COLUMN] + right


def _fit_text(text: str, width: int, right: bool, center: bool = False) -> str:
    if _width(text) > width:
        while text and _width(text) > width - 1:
            text = text[:-1]
        text += ELLIPSIS
    pad = width - _width(text)
    if center:
        return " " * (pad // 2) + text + " " * (pad - pad // 2)
    return " " * pad + text if right else text + " " * pad


def _draw(columns: list[_Column], elided: bool) -> list[str]:
    widths = [c.width for c in columns]

    def border(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def row(cells: list[str]) -> str:
        return "│" + "│".join(f" {c} " for c in cells) + "│"

    lines = [
        border("┌", "┬", "┐"),
        row([_fit_text(_cell(c.name), w, False, center=True) for c, w in zip(columns, widths)]),
        row([_fit_text(c.type_, w, False, center=True) for c, w in zip(columns, widths)]),
    ]
    lines.append(border("├", "┼", "┤"))

    def data_rows(part: str) -> None:
        count = max((len(getattr(c, part)) for c in columns), default=0)
        for r in range(count):
            lines.append(
                row(
                    [
                        _fit_text(
                            ELLIPSIS if c is ELLIPSIS_COLUMN else _cell(getattr(c, part)[r]),
                            w,
                            c.right,
                        )
                        for c, w in zip(columns, widths)
                    ]
                )
            )

    data_rows("head")
    if elided:
        for _ in range(3):
            lines.append(
                row(
                    [
                        _fit_text(DOT, w, c.right, center=not c.right)
                        for c, w in zip(columns, widths)
                    ]
                )
            )
        data_rows("tail")
    lines.append(border("└", "┴", "┘"))
    return lines
