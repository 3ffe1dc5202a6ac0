"""Runs hostile statements in a child process and reports each outcome as a JSON line.

``python -m tests.hostile.worker MEMORY_BYTES [--live]`` (0 bytes: no cap) reads
one JSON object per line (``{"id": ..., "sql": ...}``) from stdin. Before each statement it writes
``{"id": ..., "start": true}`` so that the parent knows which statement a
timeout or a crash belongs to; after it, ``{"id", "outcome", "detail",
"seconds"}`` with outcome ``rows``, ``error`` (a matchsql.Error),
``traceback`` (a matchsql.Error whose message holds a Python traceback) or
``exception`` (anything else). The last line is ``{"rss_mib": peak}``.

With ``--live`` the statements run in a file database of a private directory, with a
stream registry of their own and the stream, tables and sink of
tests/hostile/live_corpus.py; each statement's ``{tmp}`` is that directory, and the
settings are reset after each statement (a SET that was taken is the statement's
outcome, not the next one's weather).

The address space is capped with RLIMIT_AS so that a runaway statement dies
of MemoryError here instead of taking the machine down. The cap is MEMORY_BYTES
above the address space the worker holds once set up and warm: the libraries
reserve far more than they touch (31 threads' stacks and malloc arenas, LLVM and
DuckDB: about 3 GiB of address space for 0.5 GiB resident), so a fixed 2 GiB cap
left a few MiB of room, and whichever allocation crossed it failed, often not the
statement's own (a MemoryError reading stdin, a SIGSEGV in the parser's thread).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time

import matchsql
from matchsql.config import Config
from tests.hostile.corpus import SEEDS
from tests.hostile.live_corpus import STREAM_COLUMNS

#: Small tables next to the demo ``trade`` table (500k rows, 50 symbols).
TABLES = {
    "t100": 100,
    "t100k": 100_000,
}

#: Run, besides the seeds, by the uncapped warm-up (run.py): shapes whose kernels the
#: seeds do not load (large and PERMUTE programs, nested stars), built cold in a capped
#: worker they aborted it.
WARM_ONLY = [
    "SELECT * FROM t100 MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
    "PATTERN (A{1,1000} B) DEFINE B AS price > 100)",
    "SELECT * FROM t100 MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
    "PATTERN (PERMUTE(V0, V1, V2, V3, V4, V5, V6)) DEFINE V0 AS price > 100)",
    "SELECT * FROM t100 MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
    "PATTERN ((A|B)*(A|B)*(A|B)*C) DEFINE A AS price > 100, B AS price <= 100, C AS price < 0)",
]

TRACEBACK_MARKS = ("Traceback (most recent call last)", 'File "', "Error: Traceback")


#: The statements' buffer limit (max_buffered_bytes). A runaway attempt (the corpus'
#: "runaway" family) must stop within the 10 s cap, which it does at the buffer limit
#: only when the limit is below its partition: under the default (an eighth of the
#: machine's memory) a pattern that never decides on t100k reads to the end from every
#: row. 1 MB holds 25,000 to 125,000 of t100k's rows (8 to 40 bytes as a scan reads
#: them), where the old default stopped at 50,000.
BUFFER_LIMIT = "1MB"


def setup(con: matchsql.Connection) -> None:
    for name, rows in TABLES.items():
        con.duckdb.execute(
            f"CREATE TABLE {name} AS SELECT i AS id, 'S' || (i % 3) AS symbol, "
            "(100 + (i * 7919) % 13 - 6)::DOUBLE AS price, (i % 5)::BIGINT AS volume, "
            "TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND AS ts "
            f"FROM range({rows}) r(i)"
        )


def live_setup() -> tuple[matchsql.Connection, str]:
    """A private directory with its stream registry, a file database, its stream ``ticks``
    (archived, so continuous queries may read it), ``t100`` and ``sink``."""
    tmp = tempfile.mkdtemp(prefix="hostile-live-")
    os.environ["MATCHSQL_RUNTIME_DIR"] = os.path.join(tmp, "runtime")
    con = matchsql.connect(os.path.join(tmp, "live.duckdb"), demo=False)
    setup(con)
    con.sql(f"CREATE STREAM ticks {STREAM_COLUMNS} WITH (capacity = 1000, archive = '{tmp}/hist/')")
    con.sql("CREATE TABLE sink (k BIGINT, s BIGINT, e BIGINT)")
    return con, tmp


def reset_settings(con: matchsql.Connection) -> None:
    for name in Config.names():
        con.sql(f"RESET {name}")


def outcome_of(con: matchsql.Connection, sql: str) -> tuple[str, str]:
    """Run ``sql`` to the end; the outcome kind and a one-line detail."""
    try:
        result = con.sql(sql)
        rows = 0 if result is None else len(result.fetchall())
        return "rows", str(rows)
    except matchsql.Error as err:
        text = str(err)
        if any(mark in text for mark in TRACEBACK_MARKS):
            return "traceback", text[:2000]
        return "error", f"{type(err).__name__}: {text.splitlines()[0][:300]}"
    except BaseException as exc:  # noqa: BLE001 - reporting exactly these is the point
        return "exception", f"{type(exc).__name__}: {str(exc)[:300]}"


def main() -> None:
    limit = int(sys.argv[1])
    live = "--live" in sys.argv[2:]
    tmp = ""
    if live:
        con, tmp = live_setup()
    else:
        con = matchsql.connect(max_buffered_bytes=BUFFER_LIMIT)
        setup(con)
    for sql in SEEDS + ([] if limit else WARM_ONLY):  # compiled kernels come from the
        outcome_of(con, sql)  # cache (or are built) before timing
    if limit:  # 0: no cap (run.py warms numba's cache so)
        cap = address_space() + limit
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    emit({"ready": True})
    for line in sys.stdin:
        item = json.loads(line)
        emit({"id": item["id"], "start": True})
        began = time.monotonic()
        kind, detail = outcome_of(con, item["sql"].replace("{tmp}", tmp))
        if live:
            reset_settings(con)
        emit(
            {
                "id": item["id"],
                "outcome": kind,
                "detail": detail,
                "seconds": round(time.monotonic() - began, 3),
            }
        )
    emit({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024})


def address_space() -> int:
    """Bytes of address space this process holds now (VmSize)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
