"""A result's values and types exactly as DuckDB's Python API gives them.

Rows travel as Arrow batches (from DuckDB, from the matchers), and Arrow has no
HUGEINT, UUID, JSON or ENUM of its own: DuckDB exports a HUGEINT as a
``decimal128(38, 0)`` and a UUID as a string. Turning those batches into Python
values or a DataFrame with pyarrow would then give ``Decimal('3')`` where DuckDB
gives ``3``, or an object column where DuckDB gives float64. So the batches go
back into DuckDB, each column cast to the DuckDB type the statement had, and
DuckDB's own ``fetchall``/``df`` convert them: one set of conversion rules, DuckDB's.

One DuckDB connection does this (and draws values as text for the shell, see
:mod:`matchsql.results.render`): the shell lends a cursor of the connection it has
open anyway, else a private in-memory instance opens on first use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")
DuckType = Any  # duckdb.sqltypes.DuckDBPyType (its module path moved between releases)

#: Types whose Arrow export DuckDB cannot read back by a cast (the bytes mean another
#: thing as a BLOB): such a column keeps the type DuckDB reads from Arrow.
_NOT_CAST = ("BIT", "BIGNUM", "VARINT")


class SharedConnection:
    """A DuckDB connection kept open for converting values, used one caller at a time.

    Opening a DuckDB instance costs more than converting a small result (tens of
    ms); results are read on the shell's worker thread and in the Python API, so
    uses are serialised. A lent cursor whose connection was closed since is
    replaced by a private one.
    """

    def __init__(self) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()

    def lend(self, con: duckdb.DuckDBPyConnection) -> None:
        """Convert on ``con`` from now on (a cursor nobody else uses)."""
        with self._lock:
            self._con = con

    def run(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``work(connection)``, alone on the connection."""
        with self._lock:
            if self._con is None:
                self._con = duckdb.connect()
            try:
                return work(self._con)
            except duckdb.ConnectionException:  # the lent cursor's connection was closed
                self._con = duckdb.connect()
                return work(self._con)


shared = SharedConnection()


def types_of_schema(schema: pa.Schema) -> list[DuckType]:
    """The DuckDB types DuckDB reads ``schema``'s columns as (for rows with no statement
    type of their own: SHOW STREAMS, EXPLAIN)."""
    return shared.run(lambda con: list(con.from_arrow(schema.empty_table()).types))


def retyped_types(schema: pa.Schema, retyped: dict[str, str]) -> list[DuckType]:
    """The DuckDB types of ``schema``'s columns, those in ``retyped`` as it names them (a
    HUGEINT measure's Arrow form is decimal128(38, 0), which DuckDB reads as a DECIMAL)."""
    read = types_of_schema(schema)
    return [
        duckdb.sqltype(retyped[name]) if name in retyped else kind
        for name, kind in zip(schema.names, read)
    ]


def _typed(
    con: duckdb.DuckDBPyConnection, table: pa.Table, types: Sequence[DuckType] | None
) -> duckdb.DuckDBPyRelation:
    """``table`` as a DuckDB relation whose columns have ``types`` (cast where DuckDB
    reads their Arrow form as another type), named as in ``table``."""
    relation = con.from_arrow(table)
    if types is None or len(types) != table.num_columns:
        return relation
    read = relation.types
    if all(str(a) == str(b) for a, b in zip(read, types)):
        return relation
    columns = []
    for i, (name, have, want) in enumerate(zip(table.column_names, read, types)):
        wanted = str(want)
        column = f"#{i + 1}"
        if str(have) != wanted and not any(word in wanted for word in _NOT_CAST):
            column = f"CAST({column} AS {wanted})"
        columns.append(f"{column} AS {_quote(name)}")
    try:
        return relation.project(", ".join(columns))
    except duckdb.Error:  # a type that does not read back by a cast: as DuckDB reads it
        return relation


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: DuckDB types whose values pyarrow's ``to_pylist`` gives just as DuckDB does (checked by
#: tests/api/test_duckdb_types.py): such columns skip the trip through DuckDB, which
#: costs about as much again as the conversion itself.
_AS_ARROW = re.compile(
    r"(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|"
    r"UBIGINT|FLOAT|DOUBLE|VARCHAR|BLOB|DATE|TIME|TIMESTAMP|"
    r"DECIMAL\(\d+,\d+\))(\[\])*"
)


def python_rows(table: pa.Table | pa.RecordBatch, types: Sequence[DuckType] | None) -> list[tuple]:
    """``table``'s rows as Python tuples, valued as DuckDB's ``fetchall`` values them."""
    if not table.num_rows or not table.num_columns:
        return [()] * table.num_rows
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if types is None or len(types) != table.num_columns:
        types = types_of_schema(table.schema)
    via_duckdb = [i for i, kind in enumerate(types) if not _AS_ARROW.fullmatch(str(kind))]
    columns: list[list] = [[] for _ in range(table.num_columns)]
    for i in range(table.num_columns):
        if i not in via_duckdb:
            columns[i] = table.column(i).to_pylist()
    if via_duckdb:
        part = table.select(via_duckdb)
        wanted = [types[i] for i in via_duckdb]
        converted = shared.run(lambda con: _typed(con, part, wanted).fetchall())
        for j, values in zip(via_duckdb, zip(*converted, strict=True), strict=True):
            columns[j] = list(values)
    return list(zip(*columns, strict=True))


def data_frame(table: pa.Table, types: Sequence[DuckType] | None):
    """``table`` as a pandas DataFrame, typed as DuckDB's ``df()`` types it."""
    if not table.num_columns:  # nothing DuckDB could scan
        return table.to_pandas()
    return shared.run(lambda con: _typed(con, table, types).df())
