"""Spark <-> Arrow schemas, and the pyspark version check.

The matcher and the analyser speak Arrow; Spark speaks StructType. Spark
hands TIMESTAMP (with local time zone) columns to Arrow UDFs as
``timestamp[us, tz=<session time zone>]`` and TIMESTAMP_NTZ as
``timestamp[us]``, which DuckDB reads as TIMESTAMPTZ and TIMESTAMP: the
analysis therefore types expressions exactly as the embedded engine would
for a table with those DuckDB types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from matchsql.errors import SemanticError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def require_pyspark() -> None:
    """applyInArrow and the stateful pandas operator need pyspark 4."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise ImportError(
            "matchsql.integrations.spark needs pyspark >= 4.0 (pip install pyspark)"
        ) from exc
    major = int(pyspark.__version__.split(".")[0])
    if major < 4:
        raise ImportError(
            f"matchsql.integrations.spark needs pyspark >= 4.0, found {pyspark.__version__}"
        )


def session_time_zone(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.session.timeZone") or "UTC"


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema in which Spark hands ``df``'s rows to Arrow UDFs."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(df.schema, timezone=session_time_zone(df.sparkSession))
    except Exception as exc:  # pyspark raises several types for unsupported columns
        raise SemanticError(f"a column type of the DataFrame has no Arrow form: {exc}") from None


def spark_schema_of(schema: pa.Schema) -> StructType:
    """The Spark schema of the matches (Arrow output schema of the MatchSpec)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return from_arrow_schema(schema, prefer_timestamp_ntz=True)
    except Exception as exc:
        raise SemanticError(
            f"an output column type has no Spark equivalent ({exc}); cast the measure "
            "to a type Spark supports"
        ) from None


def as_spark_arrow(schema: pa.Schema, time_zone: str) -> pa.Schema:
    """``schema`` as Spark returns it from Arrow UDFs (time-zoned timestamps in ``time_zone``)."""
    fields = []
    for f in schema:
        kind = f.type
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            kind = pa.timestamp("us", tz=time_zone)
        fields.append(pa.field(f.name, kind, f.nullable))
    return pa.schema(fields)
