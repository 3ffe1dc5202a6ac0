"""Each row's match of a row pattern window, found by the MATCH_RECOGNIZE matchers.

Rows are taken in partition order; a row inside the skipped span of an earlier
row's match (AFTER MATCH SKIP, counted from that row: see :func:`_resume`) is
unmatched; any other row gets the first match within its own frame (ROWS BETWEEN
CURRENT ROW AND ..), starting at the row (INITIAL, the pattern anchored with
``^``) or at the first row of the frame where one starts (SEEK). Two ways to
find it, with the same results (see :func:`scan_spec`):

* one run of a partition matcher (matchsql/engine/planner.py) per row, over that row's frame
  only, so that neither matching nor navigation sees a row outside the frame;
* where no navigation reads a row before the match and frames reach the
  partition's end, one run per partition with AFTER MATCH SKIP TO NEXT ROW,
  which tries every row once, independently.

The matchers' output (ONE ROW PER MATCH) carries hidden measures with the
match's first and last row number and the AFTER MATCH SKIP target.
"""

from __future__ import annotations

import bisect
import dataclasses

import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.planner import choose_path, new_partition_matcher
from matchsql.errors import ExecutionError
from matchsql.execution.router.partitions import feed_last, segments
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.plan.pattern import (
    Alternation,
    Concatenation,
    Exclusion,
    Label,
    PatternNode,
    Permutation,
    Quantified,
)
from matchsql.plan.row_functions import Navigation
from matchsql.plan.spec import MatchSpec, SkipMode
from matchsql.runtime.cancel import Cancellation

__all__ = ["FIRST_ROW", "LAST_ROW", "ROW", "SKIP_TARGET", "WindowRuns", "match_window", "scan_spec"]

ROW = "__matchsql_row"  # the input column numbering the rows, which the measures join back by
#: Hidden measures: the match's first and last row number and the AFTER MATCH SKIP target.
FIRST_ROW, LAST_ROW, SKIP_TARGET = "__matchsql_first", "__matchsql_last", "__matchsql_skip_to"
_FIRST_CHUNK = 16  # rows of a frame fed before looking for a match; doubles after


@dataclasses.dataclass(frozen=True)
class WindowRuns:
    """How one window's rows are matched.

    ``spec`` is the per-row spec (ONE ROW PER MATCH, SKIP PAST LAST ROW, the pattern
    anchored for INITIAL); ``scan`` the whole-partition one where it applies; ``skip``
    and ``skip_variable`` the window's own AFTER MATCH SKIP; ``end`` the frame end in
    rows after the current one (None: the partition's end); ``columns`` the measure
    columns to return.
    """

    spec: MatchSpec
    scan: MatchSpec | None
    seek: bool
    skip: SkipMode
    skip_variable: str | None
    end: int | None
    config: Config
    columns: tuple[str, ...]


def match_window(runs: WindowRuns, table: pa.Table, cancel: Cancellation) -> pa.Table:
    """Per input row: the row number and the values of ``runs.columns`` over its match.

    ``table`` holds the input rows sorted by the window's partition and order keys.
    """
    spec = runs.scan if runs.scan is not None else runs.spec
    config = runs.config
    choose_path(spec, config.execution_path)  # a forced path that does not apply says so now
    match = _scan_partition if runs.scan is not None else _match_partition
    rows = table.combine_chunks().to_batches()
    batch = rows[0] if rows else pa.RecordBatch.from_pylist([], schema=table.schema)
    derive = derive_input(spec)
    if derive is not None:
        batch = derive(batch)
    matches = _Found()
    take: list[int | None] = []
    if batch.num_rows:
        for start, stop in segments(batch, spec.partition_by):
            part = batch.slice(start, stop - start)
            key = tuple(part.column(k)[0].as_py() for k in spec.partition_by)
            take += match(runs, part, key, cancel, matches)
    out_schema = spec.output_schema()
    found = (
        pa.Table.from_batches(matches.batches, schema=out_schema)
        if matches.rows
        else out_schema.empty_table()
    )
    project = project_result(spec)
    if project is not None:  # measures DuckDB computes over the matches (one row each)
        found = pa.Table.from_batches(
            list(project.batches(found.combine_chunks().to_batches())), schema=project.schema
        )
    picked = found.take(pa.array(take, pa.int64()))
    columns = {ROW: batch.column(ROW) if batch.num_rows else pa.array([], pa.int64())}
    for name in dict.fromkeys(runs.columns):
        columns[name] = picked.column(name)
    return pa.table(columns)


class _Found:
    """The output rows of the matches found so far, as the batches they came in."""

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> int:
        """Keep ``batch``; the index its first row has among all rows kept."""
        self.batches.append(batch)
        self.rows += batch.num_rows
        return self.rows - batch.num_rows


def _match_partition(
    runs: WindowRuns, part: pa.RecordBatch, key: tuple, cancel: Cancellation, matches: _Found
) -> list[int | None]:
    """The index into ``matches`` of each row's match (None: unmatched), adding to it."""
    n = part.num_rows
    where = {rid: i for i, rid in enumerate(part.column(ROW).to_pylist())}
    take: list[int | None] = [None] * n
    resume = 0  # rows before it lie in the skipped span of an earlier row's match
    for row in range(n):
        if row < resume:
            continue
        last = n - 1 if runs.end is None else min(n - 1, row + runs.end)
        match = _first_match(runs, part, row, last, key, cancel)
        if match is None:
            continue
        take[row] = matches.add(match)
        if match.column(FIRST_ROW)[0].is_valid:
            resume = _resume(runs, match, where, row)
        else:  # an empty match: the next row is tried next
            resume = row + 1
    return take


def scan_spec(spec: MatchSpec, end: int | None) -> MatchSpec | None:
    """The spec of a whole-partition run whose match from each start row is that row's
    match in the window, or None where there is no such run.

    With SKIP TO NEXT ROW a partition run tries every row once, each attempt on its own;
    the attempt at row s sees what the window's run for a row r <= s sees when the frame
    reaches the partition's end and nothing reads a row before the match's first one
    (no PREV: FIRST/LAST and aggregates stay inside the match). Empty matches are ruled
    out because they carry no row that would say where they start.
    """
    if end is not None or _matches_empty(spec.pattern):
        return None
    exprs = [*spec.defines.values(), *(m.expr for m in spec.measures)]
    if any(n.kind == "PREV" for e in exprs for n in e.find_all(Navigation)):
        return None
    return dataclasses.replace(spec, skip=SkipMode.TO_NEXT_ROW)


def _matches_empty(node: PatternNode) -> bool:
    """Whether ``node`` can match no rows at all."""
    if isinstance(node, Label):
        return False
    if isinstance(node, Quantified):
        return node.min == 0 or _matches_empty(node.child)
    if isinstance(node, Alternation):
        return any(_matches_empty(item) for item in node.items)
    if isinstance(node, (Concatenation, Permutation)):
        return all(_matches_empty(item) for item in node.items)
    if isinstance(node, Exclusion):
        return _matches_empty(node.child)
    return True  # (), anchors


def _scan_partition(
    runs: WindowRuns, part: pa.RecordBatch, key: tuple, cancel: Cancellation, matches: _Found
) -> list[int | None]:
    """:func:`_match_partition` from one run over the whole partition (see scan_spec)."""
    assert runs.scan is not None
    matcher = new_partition_matcher(runs.scan, key, runs.config, cancel)
    found = [b for b in feed_last(matcher, part) if b.num_rows]
    n = part.num_rows
    take: list[int | None] = [None] * n
    if not found:
        return take
    every = pa.concat_batches(found)
    base = matches.add(every)
    where = {rid: i for i, rid in enumerate(part.column(ROW).to_pylist())}
    starts = [where[rid] for rid in every.column(FIRST_ROW).to_pylist()]  # ascending
    resume = 0
    for row in range(n):
        if row < resume:
            continue
        k = bisect.bisect_left(starts, row)
        if k == len(starts) or (starts[k] != row and not runs.seek):
            continue
        take[row] = base + k
        resume = _resume(runs, every.slice(k, 1), where, row)
    return take


def _resume(runs: WindowRuns, match: pa.RecordBatch, where: dict, row: int) -> int:
    """The next row to seek a match for after ``row``'s match (AFTER MATCH SKIP).

    In a window each row's match is sought from that row, so the skip counts from
    the row, not from the match's first row (they differ only with SEEK, where the
    match may start later): TO NEXT ROW goes on with the row after it, skipping no
    row even when the match is detached; PAST LAST ROW skips every row up to the
    match's last; TO FIRST/LAST v resumes at that row, which must lie after the row
    (otherwise the same row would be sought again, forever).
    """
    mode = runs.skip
    if mode is SkipMode.PAST_LAST_ROW:
        return where[match.column(LAST_ROW)[0].as_py()] + 1
    if mode is SkipMode.TO_NEXT_ROW:
        return row + 1
    target = match.column(SKIP_TARGET)[0].as_py()
    how = "FIRST" if mode is SkipMode.TO_FIRST else "LAST"
    if target is None:
        raise ExecutionError(
            f"AFTER MATCH SKIP TO {how} {runs.skip_variable} failed: the pattern variable is "
            f"not present in the match of partition row {row + 1}"
        )
    if where[target] <= row:
        raise ExecutionError(
            f"AFTER MATCH SKIP TO {how} {runs.skip_variable} failed: it would skip to the "
            f"first row of the match of partition row {row + 1}"
        )
    return where[target]


def _first_match(
    runs: WindowRuns, part: pa.RecordBatch, row: int, last: int, key: tuple, cancel: Cancellation
) -> pa.RecordBatch | None:
    """The first match within the frame ``part[row:last + 1]`` (one output row), or None.

    The frame is fed in growing chunks: a match found early stops the run
    without reading the rest of the frame, and so does an anchored (INITIAL)
    pattern's failed attempt at the frame's first row. A matcher holds every
    row from its oldest undecided attempt or unreported match on, so once it
    holds fewer rows than it was fed, the attempt at the first row is over and
    its match, if any, was returned.
    """
    matcher = new_partition_matcher(runs.spec, key, runs.config, cancel)
    at, size = row, _FIRST_CHUNK
    while at <= last:
        stop = min(last + 1, at + size)
        piece = part.slice(at, stop - at)
        out = feed_last(matcher, piece) if stop > last else matcher.feed(piece)
        for batch in out:
            if batch.num_rows:
                return batch.slice(0, 1)
        if not runs.seek and matcher.buffered_rows < stop - row:
            return None
        at, size = stop, size * 2
    return None
