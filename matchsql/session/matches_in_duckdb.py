"""A MATCH_RECOGNIZE's matches where DuckDB reads them: the view registered in its place
in the statement around it, and the casts that give its columns their DuckDB types back.

The matchers carry some DuckDB types in another Arrow form (a UUID, JSON or ENUM as a
string, a HUGEINT as decimal128(38, 0)) that DuckDB would read as that other type: the
statement DuckDB runs reads the view through casts back, so that the statement's
columns have the types they would have without MATCH_RECOGNIZE in between.
"""

from __future__ import annotations

import itertools
import re

import pyarrow as pa
from sqlglot import exp

from matchsql.grammar.typer import cast_back
from matchsql.plan.spec import MatchSpec, quoted

_view_numbers = itertools.count()
#: The names :func:`view_name` gives: an input query that names one reads an inner
#: MATCH_RECOGNIZE's matches.
MATCH_VIEW = re.compile(r"__matchsql_matches_\d+")


def view_name() -> str:
    """A new name for the view of one MATCH_RECOGNIZE's matches."""
    return f"__matchsql_matches_{next(_view_numbers)}"


def passed_retyped(spec: MatchSpec, schema: pa.Schema, types: list[str]) -> dict[str, str]:
    """The input columns the result passes through (PARTITION BY keys, ALL ROWS PER MATCH's
    columns) whose DuckDB type a cast must give back to them (a UUID, JSON or ENUM the
    matchers carry as a string, a HUGEINT as decimal128(38, 0)), each with its type."""
    measures = {m.name for m in spec.projection or spec.measures}
    out = set(spec.result_schema().names) - measures
    found = {}
    for field, kind in zip(schema, types):
        if field.name in out:
            back = cast_back(field.type, kind)
            if back is not None:
                found[field.name] = back
    return found


def read_back(view: str, retyped: dict[str, str], alias: exp.Expression | None) -> exp.Expr:
    """What stands for a MATCH_RECOGNIZE in the statement DuckDB runs: its matches' view,
    with each ``retyped`` column cast back to its DuckDB type (a HUGEINT sum, which the
    matches carry as Arrow's decimal128(38, 0))."""
    if not retyped:
        return exp.Table(this=exp.to_identifier(view), alias=alias)
    casts = ", ".join(
        f"CAST({quoted(name)} AS {kind}) AS {quoted(name)}" for name, kind in retyped.items()
    )
    select: exp.Expr = exp.maybe_parse(
        f"SELECT * REPLACE ({casts}) FROM {quoted(view)}", dialect="duckdb"
    )
    return exp.Subquery(this=select, alias=alias or exp.TableAlias(this=exp.to_identifier(view)))
