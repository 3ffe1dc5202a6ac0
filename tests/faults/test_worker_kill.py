"""Worker processes and their router killed with SIGKILL, and a disk that fills under a
continuous query's checkpoints: each trial ends cleanly.

Every trial runs the query in a process of its own (``workers = 2``) and
injects one fault:

* ``cq-worker-start`` / ``cq-worker-run``: SIGKILL of one worker of a named
  continuous query (``CREATE CONTINUOUS QUERY ... AS INSERT INTO sink ...``)
  while its pool starts / at a random moment while it runs; a producer
  process writes ``0..N-1`` meanwhile. The query goes back to its checkpoint
  with a fresh pool and finishes: the sink equals the one-time query over
  ``0..N-1`` (0 lost, 0 duplicated matches);
* ``query-worker-start`` / ``query-worker-run``: the same for a one-time
  query (run three times in a row by the process): each run returns the right rows
  or fails with an error that names the worker and its signal ("did not start:
  killed by signal 9 (SIGKILL)"), and the other run returns the right rows;
* ``query-process`` / ``cq-process``: SIGKILL of the query's own process at a
  random moment, pool start-up included; the continuous query is started
  again and resumes from its checkpoint (0 lost, 0 duplicated);
* ``disk-full``: the continuous query's database lives on a small tmpfs,
  which the test fills completely while the query checkpoints. The query
  shows ``waiting: disk full``, its failed commit is taken back (the files on
  that disk do not grow while it waits) and it failed once; once the filler
  is deleted the query goes on by itself (0 lost, 0 duplicated).

And after every trial: no process the query's process started (its workers,
multiprocessing's resource tracker: found by a mark in their environment, so
also once they have a new parent) outlives it by more than its start-up; no
shared-memory segment of its pools is left, once one more connection was
opened (it removes what workers killed while starting could not); no error
is a traceback or an "internal error"; no query is left ``running`` without
progress.

CI runs the first three kinds (25 s here, idle); ``MATCHSQL_FAULT_TRIALS=100``
runs 100, cycling through the seven kinds (see README).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import time
import uuid
from pathlib import Path

import duckdb
import pytest

import matchsql
from matchsql.execution.workers import segments
from matchsql.storage.stream_lifecycle import create_stream
from tests.faults.test_cq_kill import PRODUCE
from tests.streams.test_continuous_queries import COLUMNS, PATTERN, SCHEMA, expected

KINDS = [
    "cq-worker-start",
    "query-process",
    "disk-full",
    "query-worker-start",
    "query-worker-run",
    "cq-worker-run",
    "cq-process",
]
TRIALS = int(os.environ.get("MATCHSQL_FAULT_TRIALS", "0")) or 3  # CI: the first three kinds
SEED = int(os.environ.get("MATCHSQL_FAULT_SEED", "1515"))
MARK = "MATCHSQL_FAULT_TRIAL"  # in the environment of every process a trial's query starts
# A running worker checks for its router every 0.25 s; one still starting runs none of our
# code before its imports end (seconds on a loaded machine: 5.7 s seen), then exits at once.
DIE_S = 30.0
WAIT_S = 120.0
STALL_S = 30.0  # "running" with tuples to read and no progress for this long: a hang
CLEAR = re.compile(
    r"worker process \d+ (\(pid \d+\) killed by signal 9 \(SIGKILL\) while "
    r"running the query|did not start: killed by signal 9 \(SIGKILL\))"
)

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "FIRST(ts) AS s, COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
    "DEFINE B AS v >= PREV(v))"
)
TABLE = (
    "CREATE TABLE t AS SELECT i % 97 AS p, i AS ts, hash(i * 31) % 1000 AS v "
    "FROM range({rows}) r(i)"
)

RUN_ONE_TIME = f"""
    import hashlib, sys
    import matchsql
    rows, warm = int(sys.argv[1]), sys.argv[2] == "warm"
    query = {QUERY!r}
    con = matchsql.connect(demo=False, workers=int(sys.argv[3]), batch_size=1_000)
    con.sql({TABLE!r}.format(rows=rows))
    if warm:
        con.sql(query).fetchall()  # the pool is up
    print("ready", flush=True)
    for attempt in range(3):
        try:
            got = con.sql(query).fetchall()
            print("rows", len(got), hashlib.sha1(repr(got).encode()).hexdigest(), flush=True)
        except matchsql.Error as exc:
            print("error", type(exc).__name__, exc.message.replace(chr(10), " "), flush=True)
    con.close()
    print("done", flush=True)
"""

RUN_QUERY = f"""
    import sys, time
    import matchsql
    database, pattern, options, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    con = matchsql.connect(database, workers=int(workers))  # an interrupted query resumes here
    con.sql("CREATE TABLE IF NOT EXISTS sink (k BIGINT, s BIGINT, e BIGINT, m BIGINT)")
    con.sql(f"CREATE CONTINUOUS QUERY IF NOT EXISTS rising WITH ({{options}}) AS "
            "INSERT INTO sink SELECT * FROM ticks " + pattern)
    print("started", flush=True)
    seen, position, moved = None, -1, time.monotonic()
    while True:
        shown = con.sql("SHOW CONTINUOUS QUERIES")
        row = dict(zip(shown.columns, shown.fetchall()[0]))
        if row["state"] != seen:
            seen = row["state"]
            print("state", seen, "|", row["error"], flush=True)
        if row["state"] in ("finished", "failed"):
            break
        if row["position"] != position:
            position, moved = row["position"], time.monotonic()
        elif row["state"] == "running" and row["lag"] and time.monotonic() - moved > {STALL_S}:
            print("stalled", row, flush=True)
            break
        time.sleep(0.01)
    runner = con._executor.continuous.runners.get("rising")
    if runner is not None:
        runner.thread.join(30)
        print("counters", runner.restarts, runner.disk_full_failures, flush=True)
    con.close()
"""


class Watched:
    """A spawned process whose output lines are read as they come (by a thread)."""

    def __init__(self, process) -> None:
        self.process = process
        self.proc = process.proc
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, prefix: str, timeout: float = WAIT_S) -> str | None:
        """The first line starting with ``prefix``; None once the process ended without it
        or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line
            if self.proc.poll() is not None and not self._thread.is_alive():
                return None
            time.sleep(0.01)
        return None

    def finish(self, timeout: float = WAIT_S) -> tuple[int, str]:
        """Wait for the end: (exit code, stdout and stderr)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001 - a hang: show what it said
            self.process.kill()
            self._thread.join(5)
            pytest.fail("hung:\n" + self.text())
        self._thread.join(10)
        return code, self.text()

    def text(self) -> str:
        err = self.proc.stderr.read() if self.proc.poll() is not None else ""
        return "\n".join(self.lines) + "\n" + err


def _start(spawn, code: str, *args: str, mark: str = "") -> Watched:
    """Spawn ``code``; ``mark`` goes into the environment of it and of all it starts."""
    if mark:
        os.environ[MARK] = mark
    try:
        return Watched(spawn(code, *args))
    finally:
        os.environ.pop(MARK, None)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _marked(mark: str) -> set[int]:
    """Live processes (zombies are dead) whose environment holds ``mark``."""
    found = set()
    needle = f"{MARK}={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        stat = _stat(int(entry))
        if needle in environ.split(b"\0") and stat is not None and stat[0] not in "ZX":
            found.add(int(entry))
    return found


def _workers(pid: int) -> list[int]:
    """The worker processes of the query's process ``pid`` (its spawned children)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[1] != pid or stat[0] in "ZX":
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        if b"spawn_main" in command:
            found.append(int(entry))
    return sorted(found)


def _greeted(pid: int) -> bool:
    """Whether worker ``pid`` has made its outbox (it greets right after): a kill before
    that is a kill during the pool's start-up."""
    outbox = re.compile(rf"/{re.escape(segments.PREFIX)}\S*-o\d+$")
    try:
        with open(f"/proc/{pid}/maps") as handle:
            return any(outbox.search(line.rstrip()) for line in handle)
    except OSError:
        return False


def _workers_up(query: Watched) -> bool:
    """Wait until ``query``'s process has worker processes; False if it never has."""
    deadline = time.monotonic() + WAIT_S
    while not _workers(query.proc.pid):
        if query.proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def _kill_a_worker(query: Watched, rng: random.Random, *, starting: bool) -> str:
    """SIGKILL one worker of ``query``'s process: within 1.5 s of the workers appearing
    (``starting``: their pool is starting, which takes seconds here) or within 1 s of
    all of them greeting (the pool is up: while its queries run). What was hit."""
    if not _workers_up(query):
        return "none (no worker appeared)"
    if starting:
        time.sleep(rng.uniform(0.0, 1.5))
    else:
        deadline = time.monotonic() + WAIT_S
        while not all(map(_greeted, _workers(query.proc.pid))):
            if query.proc.poll() is not None or time.monotonic() > deadline:
                return "none (the pool did not come up)"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 1.0))
    workers = _workers(query.proc.pid)
    if not workers:
        return "none (the workers had ended)"
    victim = rng.choice(workers)
    phase = "running" if _greeted(victim) else "starting"
    try:
        os.kill(victim, 9)
    except ProcessLookupError:
        return "none (the worker had ended)"
    return f"worker {victim} ({phase})"


def _kill_process_soon(query: Watched, rng: random.Random) -> str:
    """SIGKILL ``query``'s process: in a fifth of the trials within 0.3 s (as its pool
    is made, or before), in two fifths within 1 s of its workers appearing (their
    start-up takes seconds here), else within 0.3 s of all of them greeting (queries
    on them). What its workers were doing."""
    draw = rng.random()
    if draw < 0.2 or not _workers_up(query):
        time.sleep(rng.uniform(0.0, 0.3))
    elif draw < 0.6:
        time.sleep(rng.uniform(0.0, 1.0))
    else:
        deadline = time.monotonic() + WAIT_S
        while not all(map(_greeted, _workers(query.proc.pid))):
            if query.proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
    workers = {pid: _greeted(pid) for pid in _workers(query.proc.pid)}
    ended = query.proc.poll() is not None
    query.process.kill()
    if ended:
        return "it had ended already"
    if not workers:
        return "no worker yet"
    return "workers " + ", ".join(
        f"{pid} ({'running' if greeted else 'starting'})" for pid, greeted in workers.items()
    )


def _no_orphans(mark: str, died_at: float) -> None:
    """Every process of the trial's query ends within DIE_S of the query's process."""
    while left := _marked(mark):
        assert time.monotonic() - died_at < DIE_S, f"processes outlived their query: {left}"
        time.sleep(0.05)


def _no_segments(pids: set[int]) -> tuple[int, int]:
    """After one more connection, no segment of the pools of processes ``pids`` is left.
    (segments still there before that connection, and after)."""

    def left() -> list[str]:
        return [n for n in segments.names() if (segments.owner_of(n) or (0, 0))[0] in pids]

    before = len(left())
    matchsql.connect(demo=False).close()  # sweeps what dead owners left
    after = left()
    assert not after, f"leaked segments: {after}"
    return before, len(after)


def _sink(database: str) -> list[tuple]:
    con = duckdb.connect(database)
    try:
        got = con.sql("SELECT k, s, e, m FROM sink ORDER BY k, s").fetchall()
    finally:
        con.close()
    return got


def _file_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.iterdir() if f.name != "filler")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("trial", range(TRIALS))
def test_killed_workers_and_routers_and_a_full_disk_end_cleanly(spawn, scratch_fs, tmp_path, trial):
    rng = random.Random(SEED * 11 + trial)
    kind = KINDS[trial % len(KINDS)]
    mark = uuid.uuid4().hex
    if kind.startswith("query"):
        report = _one_time(spawn, rng, kind, mark)
    else:
        report = _continuous(spawn, scratch_fs, tmp_path, rng, kind, mark)
    print(f"trial {trial}: {kind}: {report}")


def _one_time(spawn, rng: random.Random, kind: str, mark: str) -> str:
    warm = kind == "query-worker-run"
    # A run on a warm pool takes about 0.5 s per 1.5M rows here: a kill lands in one.
    rows = (
        rng.randint(1_000_000, 3_000_000)
        if warm or kind == "query-process"
        else rng.randint(100_000, 300_000)
    )
    query = _start(spawn, RUN_ONE_TIME, str(rows), "warm" if warm else "cold", "2", mark=mark)
    assert query.wait_line("ready") is not None, query.text()
    pids = {query.proc.pid}
    if kind == "query-process":
        hit = _kill_process_soon(query, rng)
        died_at = time.monotonic()
        _no_orphans(mark, died_at)
        before, _ = _no_segments(pids)
        return (
            f"{rows} rows; the query's process killed ({hit}); its processes ended "
            f"within {time.monotonic() - died_at:.2f} s; {before} segments left for "
            "the next connection, 0 after it"
        )
    hit = _kill_a_worker(query, rng, starting=not warm)
    code, out = query.finish()
    died_at = time.monotonic()
    assert code == 0, out
    assert "Traceback" not in out and "internal error" not in out, out
    want = _reference_rows(rows)
    answers = [line for line in out.splitlines() if line.startswith(("rows", "error"))]
    assert len(answers) == 3, out
    right = sum(line == want for line in answers)
    errors = [line for line in answers if line.startswith("error")]
    for line in errors:  # a clear error: which worker, how it died
        assert CLEAR.search(line), line
    assert len(errors) <= 1 and right + len(errors) == 3, (want, out)
    _no_orphans(mark, died_at)
    _no_segments(pids)
    return (
        f"{rows} rows; killed {hit}; {right} runs right, "
        f"{len(errors)} clear errors{': ' + errors[0].split(' ', 2)[2] if errors else ''}"
    )


_REFERENCE: dict[int, str] = {}


def _reference_rows(rows: int) -> str:
    """The ``rows ...`` line of the one-time query run in this process (no workers)."""
    if rows not in _REFERENCE:
        con = matchsql.connect(demo=False, workers=1)
        con.sql(TABLE.format(rows=rows))
        got = con.sql(QUERY).fetchall()
        con.close()
        _REFERENCE[rows] = f"rows {len(got)} {hashlib.sha1(repr(got).encode()).hexdigest()}"
    return _REFERENCE[rows]


def _continuous(spawn, scratch_fs, tmp_path: Path, rng: random.Random, kind: str, mark: str) -> str:
    rows = rng.randint(8_000, 20_000)
    if kind == "disk-full":
        # Room for the database's log (a checkpoint's matcher state is about 1.4 MB
        # here), which passes DuckDB's own checkpoint size (16 MiB) in some trials.
        fs = scratch_fs(size="64m")
        if not fs.mounted:
            pytest.skip("filling a disk needs a tmpfs mount (root)")
        disk = fs.path
        options = f"checkpoint_rows = {rng.choice([300, 1000, 3000])}"
    else:
        disk = tmp_path
        options = rng.choice(["checkpoint_rows = 1500", "checkpoint_interval = 0.1"])
    database = str(disk / "cq.duckdb")
    archive = tmp_path / "hist"
    create_stream(
        duckdb.connect(),
        database,
        "ticks",
        COLUMNS,
        SCHEMA,
        capacity=rng.choice([2_000, 10_000]),
        on_full="block",
        archive=f"{archive}/",
    )
    workers = "2"
    query = _start(spawn, RUN_QUERY, database, PATTERN, options, workers, mark=mark)
    assert query.wait_line("started") is not None, query.text()
    pids = {query.proc.pid}
    producer = Watched(spawn(PRODUCE, database, str(rows), str(rng.randrange(1 << 30))))
    detail = ""
    if kind in ("cq-worker-start", "cq-worker-run"):
        detail = "killed " + _kill_a_worker(query, rng, starting=kind == "cq-worker-start")
    elif kind == "cq-process":
        hit = _kill_process_soon(query, rng)
        died_at = time.monotonic()
        _no_orphans(mark, died_at)
        before, _ = _no_segments(pids)
        detail = (
            f"the query's process killed ({hit}), its processes ended within "
            f"{time.monotonic() - died_at:.2f} s, {before} segments left for the next "
            "connection"
        )
        query = _start(spawn, RUN_QUERY, database, PATTERN, options, workers, mark=mark)
        pids.add(query.proc.pid)
    elif kind == "disk-full":
        detail = _fill_and_free(query, disk, rng)
    code, out = query.finish()
    died_at = time.monotonic()
    pcode, pout = producer.finish()
    assert pcode == 0, pout
    assert code == 0, out
    assert "Traceback" not in out and "internal error" not in out, out
    assert "state finished" in out and "stalled" not in out, out
    restarts, failures = map(int, re.search(r"counters (\d+) (\d+)", out).groups())
    if kind == "disk-full" and "waited" in detail:
        assert failures == 1, out  # the checkpoint failed once, not on every retry
    _no_orphans(mark, died_at)
    _no_segments(pids)
    got, want = _sink(database), expected(rows)
    lost, duplicated = len(set(want) - set(got)), len(got) - len(set(got))
    assert (lost, duplicated) == (0, 0), (lost, duplicated, out)
    assert got == want
    return (
        f"{rows} tuples, {options}; {detail}; {restarts} returns to the checkpoint, "
        f"{failures} failed commits; {len(want)} matches, {lost} lost, "
        f"{duplicated} duplicated"
    )


def _fill_and_free(query: Watched, disk: Path, rng: random.Random) -> str:
    """Fill ``disk`` while the query checkpoints, but for a few KiB (a checkpoint then
    fails part-way through its commit); once the query waits, check that it writes
    nothing more, then free the disk."""
    time.sleep(rng.uniform(0.1, 1.5))
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 20))  # the last write is a short one
        except OSError:
            pass
        handle.truncate(max(0, handle.tell() - rng.choice([0, 16, 64, 256]) * 1024))
    waiting = query.wait_line("state waiting: disk full", timeout=30)
    if waiting is None:  # finished before a checkpoint met the full disk
        filler.unlink()
        return "the query finished before it met the full disk"
    held = _file_bytes(disk)
    time.sleep(rng.uniform(0.3, 1.0))
    assert _file_bytes(disk) <= held, "the database's files grew while the disk was full"
    filler.unlink()
    return f"waited ({waiting.split('|', 1)[1].strip()[:90]}...), resumed once freed"
