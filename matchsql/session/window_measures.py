"""Row pattern measures over a window (SQL:2016 R020), run on MATCH_RECOGNIZE's matchers.

``SELECT .., m OVER w FROM t WINDOW w AS (.. MEASURES .. AS m .. PATTERN .. DEFINE ..)``
is rewritten so that DuckDB runs everything but the pattern matching:

1. the SELECT's single FROM source, filtered by its WHERE (window functions see
   the rows after WHERE), is read once into Arrow with a row number, and
   registered; both the matching and the rewritten statement read that copy,
   so the row numbers agree;
2. the window becomes a :class:`~matchsql.plan.spec.MatchSpec` through the very
   analysis MATCH_RECOGNIZE uses (its measures renamed, plus hidden measures for
   the first and last row of the match and the AFTER MATCH SKIP target);
3. each row's match is found by the partition matchers of MATCH_RECOGNIZE
   (matchsql/engine/planner.py), see :mod:`matchsql.execution.window_matching`;
4. the per-row measure values are registered as an Arrow table and joined back
   by row number; each ``m OVER w`` becomes a column of that join.

Semantics (Trino's documentation of row pattern recognition in a window):
measures are evaluated over the whole match (RUNNING and FINAL alike); a row
with no match, or inside the skipped span of an earlier row's match, has NULL
measures; an aggregate called over the window (``count(*) OVER w``) is the
aggregate over the match's rows, over an empty frame for an unmatched row.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.engine.compiled_query import compile_match
from matchsql.engine.planner import explain
from matchsql.errors import SemanticError
from matchsql.execution.window_matching import (
    FIRST_ROW,
    LAST_ROW,
    ROW,
    SKIP_TARGET,
    WindowRuns,
    match_window,
    scan_spec,
)
from matchsql.grammar.checks import position
from matchsql.grammar.nodes import MatchRecognizeTable, MeasureDef
from matchsql.grammar.statements import parse
from matchsql.grammar.subqueries import visible_ctes
from matchsql.grammar.window_pattern import PatternWindow
from matchsql.plan.pattern import Anchor, AnchorKind, Concatenation
from matchsql.plan.row_functions import MatchNumber, Navigation
from matchsql.plan.spec import RowsPerMatch, SkipMode
from matchsql.session.host import MatchStatements
from matchsql.session.statement_kinds import query

__all__ = ["WindowMeasures"]

_numbers = itertools.count()
#: Aggregates that give 0, not NULL, over an empty frame (an unmatched row).
_COUNTING = (exp.Count, exp.CountIf)
#: Window functions over the match's rows that are row pattern navigation.
_VALUE_FUNCTIONS: dict[type, str] = {
    exp.FirstValue: "FIRST",
    exp.LastValue: "LAST",
    exp.NthValue: "FIRST",
}
#: Window functions that sqlglot calls aggregates but that read rows around the current
#: one, not a frame: not computed over a match.
_FRAMELESS = (exp.Lag, exp.Lead)
#: Why ``auto`` runs INITIAL windows on the reference matcher (bench: 5,000 rows, one
#: anchored run per row: 1.1 s on the reference matcher, 6.5 s on the compiled kernels).
_SHORT_RUNS = (
    "INITIAL: each row's run ends with the attempt at the row, too short for the "
    "compiled kernels' per-run setup to pay off"
)
#: planner.explain lines about running whole partitions, which a window never does.
_WHOLE_PARTITION_LINES = ("partitions:", "batched:")


@dataclasses.dataclass
class _Call:
    """One ``x OVER w`` of the statement: the column that replaces it."""

    node: exp.Window
    column: str
    counting: bool  # an aggregate that counts: 0 for an unmatched row
    expr: exp.Expr | None = None  # the hidden measure computing it (None: a user measure)


@dataclasses.dataclass
class _Window:
    """One window with row pattern recognition, analysed."""

    node: PatternWindow
    prefix: str  # of the window's output columns, unique in the statement
    measures: dict[str, str]  # user measure name (lower) -> output column
    calls: list[_Call]
    runs: WindowRuns | None = None  # how its rows are matched, once analysed
    why: str | None = None  # why the per-row runs use another path than the planner's

    @property
    def name(self) -> str:
        return self.node.this.name


class WindowMeasures:
    """Runs (or explains) statements with row pattern windows for an executor."""

    def __init__(self, runner: MatchStatements) -> None:
        self.runner = runner
        self.executor = runner.executor

    @property
    def config(self) -> Config:
        return self.executor.config

    def run(self, statement: str):
        """The statement's Result (None for one that returns no rows); the registered
        tables go when it is closed. False when the statement has no row pattern window."""
        cleanups: list[Callable[[], None]] = []
        try:
            tree, windows = self._rewrite(statement, cleanups, run=True)
            if not windows:
                return False  # no row pattern window after all: the ordinary route
            if tree.find(MatchRecognizeTable) is not None:
                result = self.runner.run_match_recognize(tree.sql(dialect="matchsql"))
                result.close_with(cleanups)  # the statement's registrations go with it
                return result
        except BaseException:
            _run_all(cleanups)
            raise
        return self.executor.run_duckdb(tree.sql(dialect="duckdb"), cleanups)

    def explain_lines(self, statement: str) -> list[str]:
        """EXPLAIN lines: for each window, that it is a row pattern window, and its path."""
        cleanups: list[Callable[[], None]] = []
        try:
            windows = self._rewrite(statement, cleanups, run=False)[1]
        finally:
            _run_all(cleanups)
        lines: list[str] = []
        for number, window in enumerate(windows, 1):
            runs = window.runs
            assert runs is not None
            end = (
                "UNBOUNDED FOLLOWING"
                if runs.end is None
                else "CURRENT ROW"
                if runs.end == 0
                else f"{runs.end} FOLLOWING"
            )
            called = ", ".join(c.node.this.sql(dialect="matchsql") for c in window.calls) or "none"
            skip = runs.skip.value + (f" {runs.skip_variable}" if runs.skip_variable else "")
            lines += [
                f"-- WINDOW {window.name} #{number} of {len(windows)}: window pattern measure "
                f"(row pattern recognition in a window)",
                f"called: {called}",
                f"frame: ROWS BETWEEN CURRENT ROW AND {end}; "
                f"{'SEEK' if runs.seek else 'INITIAL'}; "
                f"AFTER MATCH SKIP {skip}",
                (
                    "per partition: one run with AFTER MATCH SKIP TO NEXT ROW gives every row's "
                    "match (no navigation before a match's start, no empty match, frames to the "
                    "partition end)"
                    if runs.scan is not None
                    else "per row: one matcher run over the row's frame"
                ),
                "then: measures joined back by row number, DuckDB runs the rest of the statement",
            ]
            shown = runs.scan if runs.scan is not None else runs.spec
            for line in explain(shown, runs.config).splitlines():
                if line.startswith("why: ") and window.why is not None:
                    line = f"why: {window.why}"
                if not line.startswith(_WHOLE_PARTITION_LINES):
                    lines.append(line)
        return lines

    # -- rewrite ------------------------------------------------------------------------

    def _rewrite(self, statement: str, cleanups: list, run: bool):
        trees = parse(statement)
        if len(trees) != 1:
            raise SemanticError("expected one statement", sql=statement, offset=0)
        tree = trees[0]
        done: list[_Window] = []
        # Innermost SELECT first: an outer one's source may read an inner one's rows.
        for select in reversed(list(tree.find_all(exp.Select, bfs=False))):
            windows = [w for w in select.args.get("windows") or [] if isinstance(w, PatternWindow)]
            if windows:
                done += self._rewrite_select(select, windows, statement, cleanups, run)
        return tree, done

    def _rewrite_select(
        self,
        select: exp.Select,
        nodes: list[PatternWindow],
        statement: str,
        cleanups: list,
        run: bool,
    ) -> list[_Window]:
        number = next(_numbers)
        # The windows' column names: the same each time the statement runs (where its first
        # window's place is known), so that their compiled queries are found again.
        where = position(nodes[0])
        windows = _collect_windows(nodes, statement, f"n{number}" if where is None else str(where))
        _collect_calls(select, windows, statement)
        for clause, words in (("group", "GROUP BY"), ("having", "HAVING")):
            if select.args.get(clause) is not None:
                raise SemanticError(
                    f"{words} is not supported in a SELECT with a row pattern window",
                    sql=statement,
                    offset=position(nodes[0]),
                )
        source, alias = _single_source(select, statement, nodes[0])
        # The source, filtered, numbered and read once (see the module docstring).
        numbered = exp.select("*", f"row_number() OVER () AS {ROW}").from_(source.copy())
        where = select.args.get("where")
        if where is not None:
            numbered.set("where", where.copy())
        ctes = visible_ctes(select.args["from_"])
        text = numbered.sql(dialect="matchsql")
        if ctes:
            text = "WITH " + ", ".join(c.sql(dialect="matchsql") for c in ctes) + " " + text
        table = self._read(text if run else f"SELECT * FROM ({text}) LIMIT 0")
        source_view = f"__matchsql_window_source_{number}"
        self._register(source_view, table, cleanups)
        _check_bare_measures(select, windows, table.schema.names, statement)
        for window in windows:
            self._analyze(window, table.schema, alias, statement)
        if not run:
            return windows
        joined = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("__s"))).from_(
            exp.Table(
                this=exp.to_identifier(source_view),
                alias=exp.TableAlias(this=exp.to_identifier("__s")),
            )
        )
        cancel = self.executor.cancellation
        hidden = [ROW]
        for window in windows:
            assert window.runs is not None
            result = match_window(window.runs, self._sorted(source_view, window, alias), cancel)
            hidden += result.schema.names[1:]
            view = f"__matchsql_window_measures_{number}_{id(window)}"
            self._register(view, result, cleanups)
            short = f"__w{len(joined.args.get('joins') or [])}"
            joined = joined.join(
                exp.Table(
                    this=exp.to_identifier(view),
                    alias=exp.TableAlias(this=exp.to_identifier(short)),
                ),
                on=f"__s.{ROW} = {short}.{ROW}",
                join_type="left",
            )
            retyped = window.runs.spec.retyped()  # a UUID, a HUGEINT: DuckDB's type back
            for name in result.schema.names[1:]:
                column: exp.Expr = exp.column(name, table=short, quoted=True)
                if name in retyped:
                    column = exp.alias_(
                        exp.cast(column, exp.DataType.build(retyped[name], dialect="duckdb")),
                        name,
                        quoted=True,
                    )
                joined = joined.select(column)
        _replace_calls(select, windows)
        _exclude_from_stars(select, hidden)
        select.set("where", None)
        qualify = select.args.get("qualify")
        if qualify is not None and not any(_own(w, select) for w in select.find_all(exp.Window)):
            # Only measure calls were left to QUALIFY: DuckDB wants a window function there,
            # and a plain filter over the joined measures means the same.
            select.set("qualify", None)
            select.set("where", exp.Where(this=qualify.this))
        select.set(
            "windows",
            [w for w in select.args["windows"] if not isinstance(w, PatternWindow)] or None,
        )
        select.args["from_"].set(
            "this",
            exp.Subquery(
                this=joined, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))
            ),
        )
        return windows

    def _sorted(self, view: str, window: _Window, alias: str) -> pa.Table:
        """The window's input rows in partition and window order (ties: source order)."""
        node = window.node
        keys = [
            _unqualified(p, alias).sql(dialect="duckdb")
            for p in node.args.get("partition_by") or []
        ]
        order = node.args.get("order")
        if order is not None:
            keys += [_unqualified(o, alias).sql(dialect="duckdb") for o in order.expressions]
        keys.append(ROW)
        return self.executor.con.sql(
            f"SELECT * FROM {view} ORDER BY {', '.join(keys)}"
        ).to_arrow_table()

    def _read(self, sql: str) -> pa.Table:
        """Rows of ``sql`` (which may hold a MATCH_RECOGNIZE) through the executor."""
        result = self.executor.dispatch(query(sql, 0))
        try:
            return result.arrow()
        finally:
            result.close()

    def _register(self, name: str, table: pa.Table, cleanups: list) -> None:
        con = self.executor.con
        con.register(name, table)
        cleanups.append(lambda: self.executor.unregister(name))

    def _analyze(self, window: _Window, schema: pa.Schema, alias: str, statement: str) -> None:
        """The window's MatchSpec, compiled as a MATCH_RECOGNIZE, and its frame."""
        node = window.node
        measures = [
            MeasureDef(
                this=m.this, alias=exp.to_identifier(window.measures[m.args["alias"].name.lower()])
            )
            for m in node.args.get("measures") or []
        ]
        measures += [
            MeasureDef(this=_unqualified(c.expr, alias), alias=exp.to_identifier(c.column))
            for c in window.calls
            if c.expr is not None
        ]
        row = exp.column(ROW, quoted=True)
        measures += [
            MeasureDef(
                this=Navigation(this=row.copy(), kind="FIRST"), alias=exp.to_identifier(FIRST_ROW)
            ),
            MeasureDef(
                this=Navigation(this=row.copy(), kind="LAST"), alias=exp.to_identifier(LAST_ROW)
            ),
        ]
        var = node.args.get("after_var")
        after = node.args.get("after")
        if var is not None:
            target = exp.column(ROW, table=var.copy(), quoted=True)
            kind = "FIRST" if after == "TO FIRST" else "LAST"
            measures.append(
                MeasureDef(
                    this=Navigation(this=target, kind=kind), alias=exp.to_identifier(SKIP_TARGET)
                )
            )
        mr = MatchRecognizeTable(
            this=exp.Table(this=exp.to_identifier(ROW)),
            partition_by=[_unqualified(p, alias) for p in node.args.get("partition_by") or []],
            measures=measures,
            after=after,
            after_var=var,
            pattern=node.args["pattern"],
            subsets=node.args.get("subsets"),
            define=node.args.get("define"),
        )
        order = node.args.get("order")
        if order is not None:
            mr.set(
                "order", exp.Order(expressions=[_unqualified(o, alias) for o in order.expressions])
            )
        # It stands where the window stands in the statement (its place keys the cache).
        mr.meta["start"] = position(node)
        spec = compile_match(
            mr,
            schema,
            sql=statement,
            con=self.executor.con,
            config=self.config,
            cache=self.executor.compiled,
            watch=self.executor.watch,
        ).spec
        seek = node.args.get("initial") is False
        pattern = spec.pattern
        if not seek:  # INITIAL: the match starts at the row
            pattern = Concatenation(items=(Anchor(AnchorKind.START), pattern))
        per_row = dataclasses.replace(
            spec,
            pattern=pattern,
            skip=SkipMode.PAST_LAST_ROW,
            skip_variable=None,
            rows_per_match=RowsPerMatch.ONE,
        )
        end = self._frame_end(node.args["end"], statement)
        scan = scan_spec(spec, end)
        config, window.why = self.config, None
        if scan is None and not seek and config.execution_path == "auto":
            config = dataclasses.replace(config, execution_path="reference")
            window.why = _SHORT_RUNS
        columns = [*window.measures.values(), *(c.column for c in window.calls)]
        window.runs = WindowRuns(
            per_row,
            scan,
            seek,
            spec.skip,
            spec.skip_variable,
            end,
            config,
            tuple(dict.fromkeys(columns)),
        )

    def _frame_end(self, end: str | exp.Expr, statement: str) -> int | None:
        if end == "UNBOUNDED":
            return None
        if end == "CURRENT ROW":
            return 0
        value: Any = None
        assert isinstance(end, exp.Expr)
        try:
            value = self.executor.con.execute(f"SELECT {end.sql(dialect='duckdb')}").fetchall()[0][
                0
            ]
        except duckdb.Error:  # not a constant: reported below
            value = None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SemanticError(
                "the frame end n FOLLOWING needs a non-negative integer constant",
                sql=statement,
                offset=position(end),
            )
        return value


# -- analysis helpers ---------------------------------------------------------------------


def _collect_windows(nodes: list[PatternWindow], statement: str, tag: str) -> list[_Window]:
    """The windows of one SELECT; ``tag`` makes their column names unique in the statement."""
    out: list[_Window] = []
    names: set[str] = set()
    for index, node in enumerate(nodes):
        if node.this.name.lower() in names:
            raise SemanticError(
                f"window {node.this.name} is defined twice",
                sql=statement,
                offset=position(node.this),
            )
        names.add(node.this.name.lower())
        for part in node.args["pattern"].this.walk():
            if isinstance(part, Anchor):
                raise SemanticError(
                    "the anchors ^ and $ are not allowed in a window pattern",
                    sql=statement,
                    offset=part.offset,
                )
        clauses = [m.this for m in node.args.get("measures") or []]
        clauses += [d.expression for d in node.args.get("define") or []]
        for clause in clauses:
            found = clause.find(MatchNumber)
            if found is not None:
                raise SemanticError(
                    "MATCH_NUMBER is not allowed in a window with row pattern recognition",
                    sql=statement,
                    offset=position(found),
                )
        measures: dict[str, str] = {}
        for k, measure in enumerate(node.args.get("measures") or []):
            alias = measure.args["alias"]
            if alias.name.lower() in measures:
                raise SemanticError(
                    f"measure {alias.name} is defined twice", sql=statement, offset=position(alias)
                )
            measures[alias.name.lower()] = f"__matchsql_w{tag}_{index}_m{k}"
        out.append(_Window(node, f"__matchsql_w{tag}_{index}", measures, []))
    return out


def _own(node: exp.Expr, select: exp.Select) -> bool:
    """True when ``node`` belongs to ``select`` itself, not to a subquery inside it."""
    return node.find_ancestor(exp.Select) is select


def _collect_calls(select: exp.Select, windows: list[_Window], statement: str) -> None:
    by_name = {w.name.lower(): w for w in windows}
    for node in list(select.find_all(exp.Window)):
        alias = node.args.get("alias")
        if (
            not isinstance(alias, exp.Identifier)
            or alias.name.lower() not in by_name
            or not _own(node, select)
            or node.args.get("partition_by")
            or node.args.get("order")
            or node.args.get("spec")
        ):
            continue
        window = by_name[alias.name.lower()]
        this = node.this
        if node.find_ancestor(exp.Where, exp.Join, exp.From, exp.Select) is not select:
            raise SemanticError(
                f"the measures of window {window.name} can be called only in the SELECT list "
                "and ORDER BY",
                sql=statement,
                offset=position(node),
            )
        if (
            isinstance(this, exp.Column)
            and not this.table
            and isinstance(this.this, exp.Identifier)
        ):
            column = window.measures.get(this.name.lower())
            if column is None:
                raise SemanticError(
                    f"{this.name} is not a measure of window {window.name}",
                    sql=statement,
                    offset=position(this),
                )
            window.calls.append(_Call(node, column, False))
        elif type(this) in _VALUE_FUNCTIONS:
            column = f"{window.prefix}_agg{len(window.calls)}"
            window.calls.append(_Call(node, column, False, _navigation(this, statement)))
        elif isinstance(this, exp.AggFunc) and not isinstance(this, _FRAMELESS):
            column = f"{window.prefix}_agg{len(window.calls)}"
            window.calls.append(_Call(node, column, isinstance(this, _COUNTING), this.copy()))
        else:
            raise SemanticError(
                f"only the measures of window {window.name}, aggregates and first_value, "
                f"last_value, nth_value can be called over it, not "
                f"{this.sql(dialect='duckdb')}",
                sql=statement,
                offset=position(this),
            )


def _navigation(call: exp.Expr, statement: str) -> Navigation:
    """first_value / last_value / nth_value over the match's rows, as FIRST / LAST."""
    if isinstance(call, exp.NthValue):
        offset = call.args.get("offset")
        if not (
            isinstance(offset, exp.Literal)
            and not offset.is_string
            and offset.this.isdigit()
            and int(offset.this) >= 1
        ):
            raise SemanticError(
                "nth_value over a row pattern window needs a positive integer constant",
                sql=statement,
                offset=position(offset or call),
            )
        return Navigation(this=call.this.copy(), kind="FIRST", offset=int(offset.this) - 1)
    return Navigation(this=call.this.copy(), kind=_VALUE_FUNCTIONS[type(call)])


def _check_bare_measures(
    select: exp.Select, windows: list[_Window], columns: list[str], statement: str
) -> None:
    """A measure named without ``OVER w`` (and naming no input column) is an error."""
    inputs = {c.lower() for c in columns} | {
        e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)
    }
    names = {name: w for w in windows for name in w.measures}
    calls = {id(c.node) for w in windows for c in w.calls}
    clauses = list(select.expressions) + (
        [select.args["order"]] if select.args.get("order") else []
    )
    for clause in clauses:
        for column in clause.find_all(exp.Column):
            if column.table or not _own(column, select) or column.name.lower() in inputs:
                continue
            window = names.get(column.name.lower())
            inside = column.find_ancestor(exp.Window)
            if window is not None and (inside is None or id(inside) not in calls):
                raise SemanticError(
                    f"measure {column.name} of window {window.name} must be called as "
                    f"{column.name} OVER {window.name}",
                    sql=statement,
                    offset=position(column),
                )


def _single_source(select: exp.Select, statement: str, where: exp.Expr) -> tuple[exp.Expr, str]:
    """The SELECT's only FROM item and the name its columns are qualified by."""
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("joins"):
        raise SemanticError(
            "a SELECT with a row pattern window needs a single table, view or "
            "subquery in FROM (put a join in a subquery)",
            sql=statement,
            offset=position(where),
        )
    source = from_.this
    alias = source.alias_or_name or "__matchsql_source"
    return source, alias


def _unqualified(node: exp.Expr, alias: str) -> exp.Expr:
    """A copy of a PARTITION BY / ORDER BY item without the source's qualifier."""
    out = node.copy()
    for column in out.find_all(exp.Column):
        if column.table and column.table.lower() == alias.lower() and not column.args.get("db"):
            column.set("table", None)
    return out


# -- rewrite helpers ----------------------------------------------------------------------


def _replace_calls(select: exp.Select, windows: list[_Window]) -> None:
    for window in windows:
        for call in window.calls:
            column: exp.Expr = exp.column(call.column, quoted=True)
            if call.counting:
                column = exp.func("coalesce", column, exp.Literal.number(0))
            node = call.node
            if isinstance(node.parent, exp.Select) and node.arg_key == "expressions":
                column = exp.alias_(
                    column,
                    node.this.sql(dialect="duckdb")
                    if not isinstance(node.this, exp.Column)
                    else node.this.name,
                    quoted=True,
                )
            node.replace(column)


def _exclude_from_stars(select: exp.Select, hidden: list[str]) -> None:
    """``*`` of the rewritten SELECT leaves out the row number and the measure columns."""
    for item in select.expressions:
        star = (
            item
            if isinstance(item, exp.Star)
            else item.this
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            else None
        )
        if star is None:
            continue
        names = list(star.args.get("except_") or [])
        star.set("except_", names + [exp.column(n, quoted=True) for n in hidden])


# -- matching -----------------------------------------------------------------------------


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    while callbacks:
        callbacks.pop()()
