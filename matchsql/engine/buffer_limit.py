"""The bound on the rows a partition holds for its open match attempts.

Every matcher (reference, compiled, whole partitions of a batch, GPU, live GPU)
holds a partition's rows from its oldest open match attempt (and the rows its
navigation reaches before that) to the newest row, and an attempt may read at
most as many rows as that bound allows: a runaway attempt (a pattern that never
decides) stops there with an error rather than exhausting memory. The bound is
in bytes, ``max_buffered_bytes``, with ``max_buffered_rows`` (0: off) as an
optional bound by count; this module is the one place that turns them into rows
and words the error.

A row's bytes are measured, not computed per row: :class:`RowWidth` adds up the
Arrow bytes of each batch a partition receives (fixed-width columns by their
width in the schema, strings and other variable-width columns by the bytes
their buffers take, ``nbytes``) and divides by the rows, so the estimate is the
partition's mean row width so far, taken once per batch. The
bound counts the rows as the input delivers them; what a matcher builds from
them (working arrays, the reference path's Python values) comes on top, which
is why the default is only a share of the machine's memory
(:func:`matchsql.config.default_max_buffered_bytes`).
"""

from __future__ import annotations

import pyarrow as pa

from matchsql.config import SIZE_RANGES, Config, format_size
from matchsql.errors import LimitExceededError
from matchsql.saved_state.state_format import state_class

#: The fewest bytes a held row counts for, whatever its columns: the matchers' own
#: bookkeeping per row (a position, a label) when no column is held.
MIN_ROW_BYTES = 8


@state_class
class RowWidth:
    """The mean bytes of a partition's input rows so far, measured once per batch.

    Made with the partition's ``schema``, fixed-width columns count their width from it
    (no call per batch); only variable-width columns (strings, dictionaries, nested
    types) are measured, by their buffers' ``nbytes``. Without a schema every column
    is measured.
    """

    def __init__(self, schema: pa.Schema | None = None) -> None:
        self.bytes = 0
        self.rows = 0
        fixed, variable = _layout(schema) if schema is not None else (0, None)
        self.fixed_bits = fixed  # bits a row's fixed-width columns take
        self.variable = variable  # the other columns' names (None: measure every column)

    def add(self, data: pa.RecordBatch | pa.Table) -> None:
        """Count ``data``'s rows (a batch or table the partition received)."""
        rows = data.num_rows
        if not rows:
            return
        if self.variable is None:
            self.bytes += data.nbytes
        else:
            self.bytes += -(-self.fixed_bits * rows // 8)
            for name in self.variable:
                self.bytes += data.column(name).nbytes
        self.rows += rows

    @property
    def per_row(self) -> int:
        """Bytes one held row counts for (at least :data:`MIN_ROW_BYTES`)."""
        if not self.rows:
            return MIN_ROW_BYTES
        return max(MIN_ROW_BYTES, -(-self.bytes // self.rows))


def _layout(schema: pa.Schema) -> tuple[int, list[str]]:
    """``(bits of the fixed-width columns, names of the variable-width ones)``."""
    bits = 0
    variable = []
    for field in schema:
        try:
            width = 0 if pa.types.is_dictionary(field.type) else field.type.bit_width
        except ValueError:  # strings, binary, nested types, null
            width = 0
        if width:
            bits += width
        else:
            variable.append(field.name)
    return bits, variable


def row_width(data: pa.RecordBatch | pa.Table) -> RowWidth:
    """The :class:`RowWidth` of ``data`` alone (a whole partition, or a batch of them)."""
    width = RowWidth(data.schema)
    width.add(data)
    return width


def max_rows(config: Config, width: RowWidth) -> int:
    """Rows a partition may hold for its open match attempts, and so the most rows one
    attempt may read: ``max_buffered_bytes`` over the row width, and at most
    ``max_buffered_rows`` where that is set; never under one."""
    rows = config.max_buffered_bytes // width.per_row
    if config.max_buffered_rows:
        rows = min(rows, config.max_buffered_rows)
    return max(rows, 1)


def check_held(config: Config, width: RowWidth, held: int, start: int, back: int = 0) -> None:
    """Fail when ``held`` rows (for the attempt or match open since partition row
    ``start``, 0-based, and ``back`` rows before it for navigation) are over the bound."""
    if held > max_rows(config, width):
        raise too_many_rows(config, width, start, back, held)


def too_many_rows(
    config: Config, width: RowWidth, start: int, back: int = 0, held: int | None = None
) -> LimitExceededError:
    """The error of a match attempt (open since 0-based partition row ``start``) that
    would hold more rows than :func:`max_rows`, with ``back`` more rows held before it
    for navigation; ``held`` is the rows it needs where known (else one more than the
    bound). ``start`` is the attempt's row, never the first held row: that one may lie
    before the partition. One message for every matcher; it names the setting that
    bound, and how to raise it."""
    limit = max_rows(config, width)
    need = max(held if held is not None else limit + 1 + back, limit + 1)
    what = f"a match attempt open since partition row {start + 1}"
    if back:
        what += f" and navigation reaching {back} rows before it"
    by_rows = (
        config.max_buffered_rows
        and config.max_buffered_rows <= config.max_buffered_bytes // width.per_row
    )
    if by_rows:
        return LimitExceededError(
            f"a partition needs more than max_buffered_rows={config.max_buffered_rows} "
            f"buffered rows ({what}); bound the pattern (e.g. WITHIN) or raise the limit with "
            "SET max_buffered_rows = ... (0 sets no bound by rows)"
        )
    per_row = width.per_row
    amount = format_size(need * per_row)
    limit_text = format_size(config.max_buffered_bytes)
    amount = "" if amount == limit_text else f"at least {amount}: "
    return LimitExceededError(
        f"a partition needs more than max_buffered_bytes = {limit_text} buffered ({amount}"
        f"{need:,} rows of about {per_row} bytes, for {what}); bound the pattern (e.g. "
        "WITHIN) or raise the limit with SET max_buffered_bytes = "
        f"'{_raised(config.max_buffered_bytes)}'"
    )


def _raised(limit: int) -> str:
    """A round size at least twice ``limit``, as a SET would write it ('8GiB')."""
    target = min(2 * limit, SIZE_RANGES["max_buffered_bytes"][1])
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if target >= size:
            return f"{-(-target // size)}{unit}"
    return f"{-(-target // 1024)}KiB"
