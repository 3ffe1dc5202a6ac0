"""Output modes of the shell (``.mode``), named and shaped as in DuckDB's CLI.

``box`` is :mod:`matchsql.results.render`'s table (the first and last ``max_rows``
rows and a row-count footer); the other modes write every row, as DuckDB's
CLI does, a batch at a time so that a long result is never held whole:

* ``csv``: a header line, then RFC 4180 rows (NULL is an empty field);
* ``markdown``: a GitHub pipe table, numbers aligned right;
* ``line``: one ``column = value`` line per value, a blank line between rows;
* ``json``: one JSON array of objects, values typed as JSON allows (numbers,
  booleans, null; everything else as DuckDB's text for it).

Values are DuckDB's text for them (a cast to VARCHAR, see
:func:`matchsql.results.render.as_text`) except in ``json``, where numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from matchsql.results.render import NULL, as_text, numeric, render_batches

if TYPE_CHECKING:
    import pyarrow as pa

Renderer = Callable[..., Iterator[str]]


def _box(
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    *,
    max_rows: int,
    max_width: int | None,
    types: list[str] | None = None,
) -> Iterator[str]:
    yield (
        render_batches(schema, batches, max_rows=max_rows, max_width=max_width, types=types) + "\n"
    )


def _texts(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> Iterator[list[tuple[str | None, ...]]]:
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    for batch in batches:
        if batch.num_rows:
            yield as_text(pa.Table.from_batches([batch], schema=schema))[1]


def _csv(schema: pa.Schema, batches: Iterable[pa.RecordBatch], **_: object) -> Iterator[str]:
    def line(values: Iterable[str | None]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(["" if v is None else v for v in values])
        return buffer.getvalue()

    yield line(schema.names)
    for rows in _texts(schema, batches):
        yield "".join(line(row) for row in rows)


def _markdown_cell(value: str | None) -> str:
    text = NULL if value is None else value
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def _markdown(schema: pa.Schema, batches: Iterable[pa.RecordBatch], **_: object) -> Iterator[str]:
    right = [numeric(t) for t in schema.types]
    yield "| " + " | ".join(_markdown_cell(n) for n in schema.names) + " |\n"
    yield "|" + "|".join("---:" if r else "---" for r in right) + "|\n"
    for rows in _texts(schema, batches):
        yield "".join("| " + " | ".join(_markdown_cell(v) for v in row) + " |\n" for row in rows)


def _line(schema: pa.Schema, batches: Iterable[pa.RecordBatch], **_: object) -> Iterator[str]:
    width = max((len(n) for n in schema.names), default=0)
    first = True
    for rows in _texts(schema, batches):
        for row in rows:
            lines = [
                f"{name:>{width}} = {NULL if v is None else v}"
                for name, v in zip(schema.names, row)
            ]
            yield ("" if first else "\n") + "\n".join(lines) + "\n"
            first = False


def _json_value(value: object, text: str | None, type_: pa.DataType) -> object:
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    if value is None:
        return None
    if pa.types.is_boolean(type_):
        return value
    if (pa.types.is_integer(type_) or pa.types.is_floating(type_)) and not (
        isinstance(value, float) and not math.isfinite(value)
    ):
        return value
    return text


def _json(schema: pa.Schema, batches: Iterable[pa.RecordBatch], **_: object) -> Iterator[str]:
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    opened = False
    for batch in batches:
        if not batch.num_rows:
            continue
        texts = as_text(pa.Table.from_batches([batch], schema=schema))[1]
        columns = [column.to_pylist() for column in batch.columns]
        for r, row in enumerate(texts):
            record = {
                name: _json_value(columns[c][r], row[c], schema.types[c])
                for c, name in enumerate(schema.names)
            }
            yield ("[" if not opened else ",\n") + json.dumps(record, ensure_ascii=False)
            opened = True
    yield "]\n" if opened else "[]\n"


#: mode name -> renderer(schema, batches, max_rows=, max_width=) yielding text pieces.
MODES: dict[str, Renderer] = {
    "box": _box,
    "duckbox": _box,
    "csv": _csv,
    "markdown": _markdown,
    "line": _line,
    "json": _json,
}


def render(
    mode: str,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    *,
    max_rows: int = 40,
    max_width: int | None = None,
    types: list[str] | None = None,
) -> Iterator[str]:
    """The pieces of text that show ``batches`` in ``mode`` (a key of :data:`MODES`);
    ``types``: the DuckDB type names of the columns, where the statement knows them."""
    return MODES[mode](schema, batches, max_rows=max_rows, max_width=max_width, types=types)
