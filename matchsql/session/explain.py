"""EXPLAIN and EXPLAIN ANALYZE of a statement with MATCH_RECOGNIZE.

EXPLAIN runs nothing: each MATCH_RECOGNIZE (innermost first) is compiled over
its input's schema, and an inner one is replaced by an empty table of its
output schema so that the outer ones can be compiled too; the lines say each
one's execution path, why, and its automaton program. EXPLAIN ANALYZE then runs
the statement to its end with a profile per MATCH_RECOGNIZE (rows in, matches,
time per stage), which the MATCH_RECOGNIZE runner fills while it matches.

Kept apart from :mod:`matchsql.session.matching`, which runs the statements:
this module knows the runner only through :class:`ExplainedRunner`, so no
import points back up; what both need of the input (its query and schema, the
tables its cursor does not see, the views of inner matches) is in modules of
their own below both.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled_query import compile_match
from matchsql.errors import ParseError
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.results.result import Result, table_result
from matchsql.session.external_tables import external_tables
from matchsql.session.host import StatementHost
from matchsql.session.input_query import input_query, typed_input_schema
from matchsql.session.matches_in_duckdb import view_name
from matchsql.session.profile import MatchProfile
from matchsql.session.query_shape import offset_of

#: EXPLAIN lines of each MATCH_RECOGNIZE, with its offset in the statement (the key of
#: its profile).
Sections = list[tuple[int | None, list[str]]]


class ExplainedRunner(Protocol):
    """What EXPLAIN needs of the MATCH_RECOGNIZE runner
    (:class:`~matchsql.session.matching.MatchRunner`)."""

    executor: StatementHost
    #: While EXPLAIN ANALYZE runs its statement: the profile of each MATCH_RECOGNIZE, by
    #: its offset in the text, filled by the runner; None otherwise.
    profiles: dict[int | None, MatchProfile] | None

    def run_match_recognize(self, statement: str) -> Any: ...


class MatchExplain:
    """EXPLAIN [ANALYZE] of the statements of one MATCH_RECOGNIZE runner."""

    def __init__(self, runner: ExplainedRunner) -> None:
        self.runner = runner
        self.executor = runner.executor

    def explain(self, statement: str, offset: int) -> Result:
        """One row per line: for each MATCH_RECOGNIZE (innermost first) its chosen
        execution path, why, and its automaton program (see matchsql/engine/planner.py.explain)."""
        lines = [line for _, section in self.sections(statement, offset) for line in section]
        return table_result(pa.table({"explain": pa.array(lines, pa.string())}))

    def sections(self, statement: str, offset: int) -> Sections:
        """EXPLAIN lines of each MATCH_RECOGNIZE, with its offset in ``statement``.

        Inner MATCH_RECOGNIZEs are replaced by empty tables of their output
        schema so that outer ones can be analysed without running anything.
        """

        query = " " * offset + statement[offset:]  # keep offsets valid for error messages
        trees = parse(query)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        executor = self.executor
        cursor = executor.con.cursor()
        sections: Sections = []
        try:
            nodes = list(trees[0].find_all(MatchRecognizeTable, bfs=False))
            for name, (value, _) in external_tables(executor, trees[0], nodes).items():
                cursor.register(name, value)
            for number, node in enumerate(reversed(nodes), 1):
                key = offset_of(node.this)
                stream = executor.streams.stream_of(node)
                if stream is not None:
                    schema = executor.streams.schema_of_stream(stream)
                else:
                    schema, _ = typed_input_schema(
                        cursor, input_query(node), node, query, executor.translate
                    )
                config = executor.config
                compiled = compile_match(
                    node,
                    schema,
                    sql=query,
                    con=cursor,
                    config=config,
                    cache=executor.compiled,
                    watch=executor.watch,
                )
                view = view_name()
                cursor.register(view, compiled.spec.result_schema().empty_table())
                node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
                lines = [f"-- MATCH_RECOGNIZE #{number} of {len(nodes)}"]
                lines += compiled.explain(config).splitlines()
                sections.append((key, lines))
        finally:
            cursor.close()
        return sections

    def analyze(self, statement: str, offset: int) -> Result:
        """EXPLAIN ANALYZE: run the statement to its end, then the EXPLAIN lines of each
        MATCH_RECOGNIZE with what it did (rows in, matches, time per stage) and the
        statement's rows and time."""
        sections = self.sections(statement, offset)
        query = " " * offset + statement[offset:]
        self.runner.profiles = {}
        started = time.perf_counter()
        rows = 0
        try:
            result = self.runner.run_match_recognize(query)
            for batch in result.fetch_batches():
                rows += batch.num_rows
            profiles = self.runner.profiles
        finally:
            self.runner.profiles = None
        elapsed = time.perf_counter() - started
        lines: list[str] = []
        for key, section in sections:
            lines += section
            profile = profiles.get(key)
            lines += (
                profile.lines()
                if profile is not None
                else ["analyze: not profiled (live stream input)"]
            )
        lines += [
            "-- statement",
            f"analyze: rows {rows:,}",
            f"analyze: total {elapsed * 1000:.3f} ms",
        ]
        return table_result(pa.table({"explain": pa.array(lines, pa.string())}))
