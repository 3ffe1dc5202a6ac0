"""One partition's rows matched in chunks on several threads, speculatively.

Sequential matching is a chain of attempt starts: the attempt at row ``a``
is decided from the rows alone, and the next attempt starts at a row that
depends only on that decision (past the match, at the next row, at the
skip target). Cut the rows to decide into chunks and run, on a thread each,
the same kernel from every chunk's first row as if an attempt started there,
deciding every attempt that needs no row of the next chunk. Chunk 0 is the
true chain. For chunk ``k`` the guess holds from the first row where the
true chain meets its speculative chain: from there both are the same chain,
so the speculative records are the true ones.

The fix-up walks the chunks in order. Where the true chain's next start
``a`` lies on chunk ``k``'s speculative chain, that chunk's records from
``a`` on are kept and the true chain goes on at the attempt the chunk left
undecided (the one that crosses into the next chunk). Elsewhere the kernel
re-runs from ``a`` in short, doubling steps until one of its attempt starts
lies on a speculative chain (re-synchronised) or the rows run out.

A row ``c`` of chunk ``k`` lies on its speculative chain when it is below the
attempt the chunk stopped at and no speculative match of the chunk covers it
past its start (``start < c <= end``): the chain only jumps over rows inside
a match (past the last row, to the next row, or to a row of the match).
That test is conservative (ALL MATCHES or SKIP TO may leave rows inside a
match that the chain visits): a row it misses only prolongs the re-run.

Sound when the decision of an attempt depends on the rows alone, i.e.
DEFINE reads the rows of the attempt and PREV/NEXT offsets around them
(chunks read the whole buffer: a chunk's window reaches ``lookback`` rows
before its first row and ``ahead`` rows past its last) and nothing carried
from match to match; :func:`unsplittable` names the queries where that does
not hold: DEFINE reading MATCH_NUMBER(), WITH UNMATCHED ROWS (an unmatched
row is output only when no earlier match covers it), WITHIN (its bounds are
buffer rows computed once), and the adaptive statistics (they count every
attempt once). Errors of a speculative attempt (too many threads, too long)
are not raised: the chunk simply ends there, and the fix-up re-runs that
attempt only if the true chain reaches it.

Match numbers are the caller's: records come back in sequential order and
the caller numbers them.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from matchsql.engine.compiled import kernel as K
from matchsql.plan.spec import MatchSpec, RowsPerMatch

#: Rows of the first re-run step of the fix-up (it doubles while not re-synchronised).
FIRST_STEP = 256
#: Chunks per thread: more, smaller chunks balance uneven match density, but every
#: chunk boundary costs a serial fix-up re-run (bench/paths.py, 1M rows: 2 beat 4).
CHUNKS_PER_THREAD = 2
#: A long partition's matcher gathers rows to decide until they fill this many chunks of
#: ``split_rows`` per thread before it runs them split (:func:`gather_rows`), up to
#: :data:`MAX_GATHER` rows.
GATHER = 16
MAX_GATHER = 1 << 21


class Run(NamedTuple):
    """The kernel's decisions from one start: records (buffer rows, label offsets into
    ``labels``), and where and why it stopped."""

    status: int
    next_start: int
    err_row: int
    records: np.ndarray
    labels: np.ndarray

    @property
    def stop(self) -> int:
        """The first attempt start this run did not decide."""
        if self.status >= K.ST_THREADS:
            return min(self.next_start, self.err_row)
        return self.next_start


NO_RECORDS = np.zeros((0, 5), np.int64)
NO_LABELS = np.zeros(0, np.int16)

#: ``call(start, limit, final=True)``: the run deciding the attempts from ``start`` that
#: read no row at or past ``limit`` (``limit`` is the caller's end: then, when ``final``,
#: it ends as the sequential run; not ``final``, an attempt still open at the end stops
#: the run there as if more rows could come).
WindowCall = Callable[..., Run]


def unsplittable(spec: MatchSpec, code: np.ndarray, within: object) -> str | None:
    """Why the chunks of a partition of ``spec`` cannot be matched speculatively, or None."""
    if spec.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED:
        return "WITH UNMATCHED ROWS depends on the matches before a row"
    if within is not None:
        return "WITHIN bounds are computed per buffer"
    if len(code) and bool((code[:, 0] == K.C_MATCHNO).any()):
        return "DEFINE reads MATCH_NUMBER()"
    return None


def cuts(start: int, stop: int, min_rows: int, threads: int) -> list[int]:
    """The first rows of the chunks of ``[start, stop)``: at least ``min_rows`` rows each,
    at most :data:`CHUNKS_PER_THREAD` per thread; a single chunk when it does not split.

    With more chunks than threads, their count is a multiple of ``threads``: the
    chunks are about equal, so three chunks on two threads take two rounds, as four
    do, while two take one.
    """
    rows = stop - start
    if min_rows <= 0 or threads <= 1 or rows < 2 * min_rows:
        return [start]
    count = max(2, min(rows // min_rows, CHUNKS_PER_THREAD * threads))
    if count > threads:
        count -= count % threads
    return [start + rows * i // count for i in range(count)]


def gather_rows(min_rows: int, threads: int) -> int:
    """Rows to decide that a long partition's matcher gathers before a split run (0: it
    matches each batch as it comes).

    Each run ends in a serial stretch on the caller's thread (the fix-up, the
    output of its matches, the next batch's input) while the chunk threads idle;
    gathering several input batches per run makes that stretch rarer and the
    chunks larger: measured (1M rows, Q1 and Q3 on one partition, 2 threads) the runs
    of 65,536 rows held the main thread 31 ms in all, those of 524,288 rows 12 ms, the
    chunks' CPU went down 10 %, and the 2-core wall, modeled from the threads' CPU
    times, from 0.12 s to 0.10 s against 0.20 s on one thread.
    """
    if min_rows <= 0 or threads <= 1:
        return 0
    return min(GATHER * min_rows * threads, MAX_GATHER)


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def pool(threads: int) -> ThreadPoolExecutor:
    """The process's chunk pool of ``threads`` threads (shared by all queries: its
    tasks never wait for one another, so sharing cannot deadlock)."""
    with _pools_lock:
        found = _pools.get(threads)
        if found is None:
            found = _pools[threads] = ThreadPoolExecutor(
                threads, thread_name_prefix="matchsql-chunk"
            )
        return found


def match_chunks(
    call: WindowCall,
    chunk_starts: list[int],
    stop: int,
    submit: Callable[..., Future] | None = None,
    first_step: int = FIRST_STEP,
    check: Callable[[], None] | None = None,
) -> Run:
    """The sequential run from ``chunk_starts[0]`` up to ``stop``, from speculative runs of
    the chunks (on ``submit``'s threads; inline without it) and the fix-up, whose re-runs
    start with ``first_step`` rows; ``check`` as in :func:`joined`."""
    ends = [*chunk_starts[1:], stop]
    # The last of several chunks is not run to the end as the sequential run would be: an
    # attempt open there would fail at the end and the attempt from every later start row
    # read to the end again, work that the sequential run may never do (an earlier attempt
    # stops it with ST_SPAN first). It stops at its open attempt; the fix-up re-runs the rest.
    finals = [True] * (len(chunk_starts) - 1) + [len(chunk_starts) == 1]
    if submit is None:
        guesses = [call(s, e, f) for s, e, f in zip(chunk_starts, ends, finals)]
    else:
        futures = [submit(call, s, e, f) for s, e, f in zip(chunk_starts, ends, finals)]
        guesses = [f.result() for f in futures]
    for guess in guesses:
        if guess.status == K.ST_CANCELLED:
            return guess
    covers = [coverage(g) for g in guesses]

    def on_chain(c: int) -> int:
        """The chunk whose speculative chain holds row ``c``, or -1."""
        if c >= stop:
            return -1
        k = bisect_right(chunk_starts, c) - 1
        if k < 0:
            return -1
        return k if bool(visited(guesses[k], covers[k], np.array([c]))[0]) else -1

    pieces: list[tuple[np.ndarray, np.ndarray]] = []
    a = chunk_starts[0]
    step = first_step
    while True:
        k = on_chain(a)
        if k >= 0:
            guess = guesses[k]
            keep(
                pieces,
                guess,
                int(np.searchsorted(guess.records[:, 1], a, "left")),
                len(guess.records),
            )
            if (
                k == len(guesses) - 1
                and guess.status < K.ST_THREADS
                and (finals[k] or guess.status == K.ST_DONE)
            ):
                return joined(guess, pieces, check)
            a, step = guess.stop, first_step
            continue
        limit = min(stop, a + step)
        run = call(a, limit)
        if run.status >= K.ST_THREADS:
            return run  # a true error (or the interrupt): the caller raises it
        found = -1
        starts = run.records[:, 1]
        for c in np.unique(starts[starts > a]).tolist():
            if on_chain(c) >= 0:
                found = c
                break
        if found >= 0:
            keep(pieces, run, 0, int(np.searchsorted(starts, found, "left")))
            a = found
            continue
        keep(pieces, run, 0, len(run.records))
        if limit >= stop or run.status == K.ST_DONE:
            return joined(run, pieces, check)
        a = run.next_start
        step *= 2


def visited(run: Run, cover: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` (at or past the run's start) its chain surely visits: below the
    attempt it stopped at and inside none of its matches past the match's start
    (``cover``: :func:`coverage` of ``run``; see the module docstring)."""
    starts, reach = cover
    i = np.searchsorted(starts, rows, "left") - 1
    inside = np.zeros(len(rows), bool)
    if len(starts):
        inside = (i >= 0) & (reach[np.maximum(i, 0)] >= rows)
    return (rows < run.stop) & ~inside


def coverage(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, reach)``: the runs' record starts and the running maximum of their last
    rows, so that a row ``c`` lies inside an earlier-starting match iff the reach of the
    last record starting before ``c`` is at least ``c``."""
    starts = run.records[:, 1]
    ends = starts + run.records[:, 2] - 1
    return starts, np.maximum.accumulate(ends) if len(ends) else ends


def keep(pieces: list, run: Run, lo: int, hi: int) -> None:
    """Append records ``lo:hi`` of ``run`` with their labels to ``pieces`` (a record's
    labels follow its predecessor's, as the kernels write them)."""
    if hi <= lo:
        return
    rec = run.records[lo:hi]
    first = int(rec[0, 4])
    last = int(rec[-1, 4] + rec[-1, 2])
    pieces.append((rec, run.labels[first:last]))


#: Labels copied between two looks at the statement's cancellation (``joined``): a split
#: run under SKIP TO NEXT ROW joins hundreds of millions of labels, which took an
#: interrupt up to a second to be noticed as one copy.
COPY_LABELS = 1 << 20


def joined(last: Run, pieces: list, check: Callable[[], None] | None = None) -> Run:
    """One run: ``pieces``' records in order (label offsets into their joined labels),
    ending as ``last`` ended. ``check`` (the statement's cancellation check) is called
    between copies of at most :data:`COPY_LABELS` labels."""
    if not pieces:
        return Run(last.status, last.next_start, last.err_row, NO_RECORDS, NO_LABELS)
    records = np.concatenate([rec for rec, _ in pieces])
    shift = np.zeros(len(pieces), np.int64)
    total = 0
    for i, (rec, lab) in enumerate(pieces):
        shift[i] = total - int(rec[0, 4])
        total += len(lab)
    records[:, 4] += np.repeat(shift, [len(rec) for rec, _ in pieces])
    labels = np.empty(total, pieces[0][1].dtype)
    at = 0
    for _, lab in pieces:
        for lo in range(0, len(lab), COPY_LABELS):
            if check is not None:
                check()
            part = lab[lo : lo + COPY_LABELS]
            labels[at : at + len(part)] = part
            at += len(part)
    return Run(last.status, last.next_start, last.err_row, records, labels)
