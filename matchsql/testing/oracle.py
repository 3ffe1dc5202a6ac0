"""A brute-force row pattern matcher that is easy to trust, for testing the real ones.

The reference and compiled matchers are automata: they run many threads in
lock step, merge equivalent ones, and decide preference through thread
order. This module does none of that. For each candidate start row it
enumerates the pattern's paths by plain recursive backtracking over the
pattern AST, *in preference order*, and takes the first complete path as the
match. The order is encoded directly in the recursion:

* concatenation: the choices of earlier items vary slowest (nested loops);
* alternation: left branch first;
* greedy quantifier: one more iteration before stopping; reluctant: stopping
  first; an iteration that matches no row ends the loop (it is not repeated,
  which would loop forever without changing the path), except while the
  minimum count still needs iterations;
* ``PERMUTE``: permutations in lexicographic order of list positions;
* ``^`` / ``$``: the partition's start / the point after its last row;
* ``{- -}``: rows are matched normally and flagged as excluded from output.

Each row's DEFINE condition is evaluated with RUNNING semantics. Which row
every value reference reads (navigation, CLASSIFIER) is decided by the
oracle's own :mod:`matchsql.testing.oracle_navigation`; operators, functions and
aggregates come from the shared value library. Independent here are the
matching, skipping, output and navigation logic. The cost is
exponential in the worst case, so the oracle is for tiny partitions only.

DejaVu's ``ALL MATCHES`` / ``INCREMENTAL MATCH``: from each start row, every
distinct end row at which some path completes is reported, in increasing end
order (an empty path first), each with the most preferred labelling among
the paths ending there; each reported match takes a match number; then AFTER
MATCH SKIP is applied relative to the standard preferred match of that start.

Not modelled: ``SEEK`` (only meaningful in window frames; treated as
``INITIAL``). ``within`` is honoured: a path may not span more than it in the
first ORDER BY column.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from matchsql.engine.compiled.within import outside
from matchsql.errors import ExecutionError, LimitExceededError
from matchsql.expr.rows import ListRows, MatchView
from matchsql.plan.pattern import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    Empty,
    Exclusion,
    Label,
    PatternNode,
    Permutation,
    Quantified,
)
from matchsql.plan.spec import MatchSpec, RowsPerMatch, SkipMode
from matchsql.testing.oracle_navigation import OracleExpression

__all__ = ["Oracle", "run_oracle", "run_oracle_partitions"]

# One step of a path: (variable, excluded from ALL ROWS output).
Step = tuple[str, bool]
Path = tuple[Step, ...]
Found = tuple[int, Path]  # (position after the last matched row, path)


class Oracle:
    """Brute-force matcher for one :class:`MatchSpec`; reusable across partitions.

    ``max_paths`` bounds the number of complete paths enumerated per start
    row (ALL MATCHES enumerates them all), so that a careless test input ends
    with :class:`LimitExceededError` rather than running for hours.
    """

    def __init__(self, spec: MatchSpec, *, max_paths: int = 200_000) -> None:
        self.spec = spec
        self.max_paths = max_paths
        self.defines: dict[str, Callable[[MatchView], Any]] = {
            name: OracleExpression(expr, spec) for name, expr in spec.defines.items()
        }
        self.measures = [OracleExpression(m.expr, spec) for m in spec.measures]
        self.all_matches = spec.all_ends
        self.schema = spec.output_schema()

    # -- public ------------------------------------------------------------------------------

    def run(self, rows: Sequence[dict], partition_key: tuple | None = None) -> list[tuple]:
        """Output rows (``spec.output_schema()`` order) for one partition's ``rows``."""
        return _Run(self, rows, partition_key).run()


def run_oracle(
    spec: MatchSpec, rows: Sequence[dict], partition_key: tuple | None = None
) -> list[tuple]:
    """Output rows of one partition: ``rows`` are dicts in ORDER BY order."""
    return Oracle(spec).run(rows, partition_key)


def run_oracle_partitions(spec: MatchSpec, rows: Sequence[dict]) -> list[tuple]:
    """Output rows of a whole input: split by the PARTITION BY values (first-seen order).

    ``rows`` must already be in ORDER BY order within each partition.
    """
    oracle = Oracle(spec)
    parts: dict[tuple, list[dict]] = {}
    for row in rows:
        parts.setdefault(tuple(row[c] for c in spec.partition_by), []).append(row)
    out: list[tuple] = []
    for key, part in parts.items():
        out.extend(oracle.run(part, key))
    return out


class _Run:
    """Matching of one partition."""

    def __init__(self, oracle: Oracle, rows: Sequence[dict], partition_key: tuple | None) -> None:
        self.o = oracle
        self.spec = oracle.spec
        self.rows = list(rows)
        self.n = len(self.rows)
        self.source = ListRows(self.rows)
        if partition_key is None:
            partition_key = (
                tuple(self.rows[0][c] for c in self.spec.partition_by)
                if self.rows
                else tuple(None for _ in self.spec.partition_by)
            )
        self.partition_key = tuple(partition_key)
        self.match_number = 0  # of the last reported match
        self.out: list[tuple] = []
        self.start = 0
        self.paths_seen = 0

    # -- driver ------------------------------------------------------------------------------

    def run(self) -> list[tuple]:
        covered = 0  # rows before this index belong to some reported non-empty match
        start = 0
        while start < self.n:
            self.start = start
            self.paths_seen = 0
            paths = self.paths(start)
            preferred = next(paths, None)
            if preferred is None:
                if self.spec.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED and start >= covered:
                    self.emit_unmatched(start)
                start += 1
                continue
            if self.o.all_matches:
                reported = self.per_end(preferred, paths)
            else:
                reported = [preferred]
            for end, path in reported:
                self.match_number += 1
                self.emit_match(start, path)
                if path:
                    covered = max(covered, end)
            start = self.next_start(start, preferred[1])
        return _normalise(self.out, self.o.schema)

    def per_end(self, preferred: Found, rest: Iterator[Found]) -> list[Found]:
        """ALL MATCHES: the most preferred path for each distinct end, by increasing end."""
        best: dict[int, Path] = {preferred[0]: preferred[1]}
        for end, path in rest:
            best.setdefault(end, path)
        return sorted(best.items())

    def next_start(self, start: int, path: Path) -> int:
        """Where AFTER MATCH SKIP resumes after the (preferred) match ``path`` from ``start``."""
        if not path:
            return start + 1  # after an empty match: always the next row
        mode = self.spec.skip
        if mode is SkipMode.PAST_LAST_ROW:
            return start + len(path)
        if mode is SkipMode.TO_NEXT_ROW:
            return start + 1
        target = self.spec.skip_variable
        assert target is not None  # SKIP TO FIRST/LAST names a variable
        members = set(self.spec.subsets.get(target, (target,)))
        hits = [start + k for k, (label, _) in enumerate(path) if label in members]
        if not hits:
            raise ExecutionError(
                f"AFTER MATCH SKIP TO {target}: the variable is not present in the match"
            )
        row = hits[0] if mode is SkipMode.TO_FIRST else hits[-1]
        if row == start:
            raise ExecutionError(
                f"AFTER MATCH SKIP TO {target}: cannot skip to the first row of the match"
            )
        return row

    # -- path enumeration ----------------------------------------------------------------------

    def paths(self, start: int) -> Iterator[Found]:
        """Complete paths from ``start`` in preference order."""
        for found in self.gen(self.spec.pattern, start, (), False):
            self.paths_seen += 1
            if self.paths_seen > self.o.max_paths:
                raise LimitExceededError("oracle: too many paths from one start row")
            yield found

    def gen(self, node: PatternNode, pos: int, path: Path, excluded: bool) -> Iterator[Found]:
        """Every way ``node`` can match from ``pos`` after ``path``, most preferred first."""
        if isinstance(node, Label):
            if pos < self.n and self.accepts(node.name, pos, path):
                yield pos + 1, path + ((node.name, excluded),)
        elif isinstance(node, Empty):
            yield pos, path
        elif isinstance(node, Anchor):
            if (node.kind is AnchorKind.START and pos == 0) or (
                node.kind is AnchorKind.END and pos == self.n
            ):
                yield pos, path
        elif isinstance(node, Concatenation):
            yield from self.sequence(node.items, 0, pos, path, excluded)
        elif isinstance(node, Alternation):
            for item in node.items:
                yield from self.gen(item, pos, path, excluded)
        elif isinstance(node, Permutation):
            for order in itertools.permutations(range(len(node.items))):
                items = tuple(node.items[i] for i in order)
                yield from self.sequence(items, 0, pos, path, excluded)
        elif isinstance(node, Exclusion):
            yield from self.gen(node.child, pos, path, True)
        elif isinstance(node, Quantified):
            yield from self.loop(node, 0, pos, path, excluded)
        else:  # pragma: no cover - the AST has no other node kinds
            raise TypeError(f"unknown pattern node {node!r}")

    def sequence(
        self, items: Sequence[PatternNode], i: int, pos: int, path: Path, excluded: bool
    ) -> Iterator[Found]:
        if i == len(items):
            yield pos, path
            return
        for pos2, path2 in self.gen(items[i], pos, path, excluded):
            yield from self.sequence(items, i + 1, pos2, path2, excluded)

    def loop(
        self, node: Quantified, count: int, pos: int, path: Path, excluded: bool
    ) -> Iterator[Found]:
        """Iterations ``count+1, ...`` of ``node`` from ``pos``, in the quantifier's order."""
        can_stop = count >= node.min
        can_iterate = node.max is None or count < node.max

        def iterate() -> Iterator[Found]:
            if not can_iterate:
                return
            for pos2, path2 in self.gen(node.child, pos, path, excluded):
                if pos2 == pos and count + 1 >= node.min:
                    # an empty iteration: repeating it changes nothing, so the loop ends here
                    yield pos2, path2
                else:
                    yield from self.loop(node, count + 1, pos2, path2, excluded)

        if node.greedy:
            yield from iterate()
            if can_stop:
                yield pos, path
        else:
            if can_stop:
                yield pos, path
            yield from iterate()

    def accepts(self, name: str, pos: int, path: Path) -> bool:
        """Does row ``pos`` satisfy ``name``'s DEFINE, given the match so far (RUNNING)?"""
        if not self.within_window(pos):
            return False
        cond = self.o.defines.get(name)
        if cond is None:
            return True
        labels = [label for label, _ in path] + [name]
        view = MatchView(self.source, self.start, labels, pos, self.match_number + 1, False)
        value = cond(view)
        return value is not None and bool(value)

    def within_window(self, pos: int) -> bool:
        within = self.spec.within
        if within is None or not self.spec.order_by:
            return True
        key = self.spec.order_by[0]
        return not outside(self.rows[self.start][key], self.rows[pos][key], within)

    # -- output ------------------------------------------------------------------------------

    def emit_match(self, start: int, path: Path) -> None:
        rpm = self.spec.rows_per_match
        labels = [label for label, _ in path]
        if not path:
            if rpm is RowsPerMatch.ALL_OMIT_EMPTY:
                return
            view = MatchView(
                self.source, start, labels, start, self.match_number, rpm is RowsPerMatch.ONE
            )
            measures = [m(view) for m in self.o.measures]
            self.out.append(self.shape(start, measures))
            return
        last = start + len(path) - 1
        if rpm is RowsPerMatch.ONE:
            view = MatchView(self.source, start, labels, last, self.match_number, True)
            self.out.append(self.shape(start, [m(view) for m in self.o.measures]))
            return
        for k, (_, excluded) in enumerate(path):
            if excluded:
                continue
            view = MatchView(self.source, start, labels, start + k, self.match_number, False)
            self.out.append(self.shape(start + k, [m(view) for m in self.o.measures]))

    def emit_unmatched(self, row: int) -> None:
        self.out.append(self.shape(row, [None] * len(self.o.measures)))

    def shape(self, row: int, measures: list[Any]) -> tuple:
        """One output row: partition columns, [order columns], measures, [other columns]."""
        spec = self.spec
        values: list[Any] = list(self.partition_key)
        if spec.rows_per_match.all_rows:
            data = self.rows[row]
            values += [data[c] for c in spec.order_by]
            values += measures
            values += [data[name] for name in spec.passed_columns]
        else:
            values += measures
        return tuple(values)


def _normalise(out: list[tuple], schema: pa.Schema) -> list[tuple]:
    """Pass the rows through the output schema's Arrow types, as a matcher's batches would.

    This makes oracle rows comparable with ``RecordBatch.to_pylist()`` output
    (ints vs floats vs decimals). A column whose values do not convert is
    left as computed, so a type disagreement shows up as a difference.
    """
    if not out or not len(schema):
        return out
    columns: list[list[Any]] = [list(col) for col in zip(*out)]
    for i, field in enumerate(schema):
        if i >= len(columns):
            break
        try:
            columns[i] = pa.array(columns[i], type=field.type).to_pylist()
        except (
            pa.ArrowInvalid,
            pa.ArrowTypeError,
            pa.ArrowNotImplementedError,
            TypeError,
            ValueError,
            OverflowError,
        ):
            pass
    return list(zip(*columns))
