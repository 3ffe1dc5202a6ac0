"""DuckDB over Arrow batches: the derived input columns and the result's projection.

Where the input does not come from a DuckDB query that can compute the
derived columns of :attr:`~matchsql.plan.spec.MatchSpec.derived` itself (a
live stream's batches), and where DuckDB computes measures over the matcher's
output (:attr:`~matchsql.plan.spec.MatchSpec.projection`), the same select
list runs over each batch on a private in-memory DuckDB connection, so the
values are DuckDB's own wherever the rows come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import duckdb
import pyarrow as pa

from matchsql.errors import ExecutionError, one_line
from matchsql.plan.spec import MatchSpec, select_list

__all__ = ["BatchSelect", "derive_input", "project_result"]


class BatchSelect:
    """``SELECT <select> FROM batch`` for each batch, cast to ``schema``."""

    def __init__(self, select: str, schema: pa.Schema) -> None:
        self.select = select
        self.schema = schema
        self._con: duckdb.DuckDBPyConnection | None = None

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self._con is None:
            self._con = duckdb.connect()
        try:
            table = self._con.from_arrow(batch).select(self.select).to_arrow_table()
        except duckdb.Error as exc:  # a value DuckDB refuses (a failed cast, say)
            raise ExecutionError(one_line(str(exc))) from None
        if not table.schema.equals(self.schema):
            table = table.cast(self.schema)
        batches = table.combine_chunks().to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=self.schema)

    def batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            for batch in batches:
                yield self(batch)
        finally:
            if self._con is not None:
                self._con.close()
                self._con = None


def derive_input(spec: MatchSpec) -> BatchSelect | None:
    """The select that adds ``spec``'s derived columns to an input batch, or None."""
    if not spec.derived:
        return None
    return BatchSelect(select_list(spec.columns.names, spec.derived), spec.columns)


def project_result(spec: MatchSpec) -> BatchSelect | None:
    """The select that turns the matcher's output into ``spec``'s result, or None."""
    if not spec.projection:
        return None
    return BatchSelect(spec.result_select(), spec.result_schema())
