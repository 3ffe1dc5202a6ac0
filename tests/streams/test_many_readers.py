"""Many readers of one stream: each has its own cursor and sees every tuple exactly once;
the slowest one holds the ring, and a reader killed with SIGKILL holds nobody for ever."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

import matchsql
from matchsql.storage.catalog import Catalog
from matchsql.storage.shm_ring import W_TAIL_SEQ, Ring
from tests.streams.conftest import WAIT_S, bounded, stream_word

EVERY_TUPLE = (
    "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE)"
)
WRITE = """
    import sys
    from matchsql.storage import Producer
    start, stop = int(sys.argv[1]), int(sys.argv[2])
    with Producer.open("ticks") as producer:
        for low in range(start, stop, 500):
            producer.write_batch({"i": list(range(low, min(low + 500, stop)))})
"""
READ = """
    import sys
    import numpy as np
    import matchsql
    con = matchsql.connect(demo=False)
    result = con.sql("SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
                     "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)")
    print("reading", flush=True)
    got = []
    for batch in result.fetch_batches():
        got.append(batch.column(0).to_numpy())
        print(len(got), flush=True)
    np.save(sys.argv[1], np.concatenate(got) if got else np.zeros(0, dtype=np.int64))
"""


def readers_of(name: str) -> int:
    ring = Ring.attach(Catalog(None).require(name).segment)
    try:
        return len(ring.readers())
    finally:
        ring.close()


def wait_for_readers(name: str, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while readers_of(name) < count:
        assert time.monotonic() < deadline, f"fewer than {count} readers registered"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("readers", "on_full", "archive"),
    [(2, "block", False), (3, "spill", False), (4, "block", True)],
)
def test_readers_in_several_processes_each_see_every_tuple_once(
    con, spawn, tmp_path, readers, on_full, archive
):
    options = f"capacity = 3000, on_full = '{on_full}'"
    if archive:
        options += f", archive = '{tmp_path / 'hist'}/'"
    con.sql(f"CREATE STREAM ticks (i BIGINT) WITH ({options})")
    procs = [spawn(READ, str(tmp_path / f"r{k}.npy")) for k in range(readers)]
    for proc in procs:
        assert proc.proc.stdout.readline().strip() == "reading"
    wait_for_readers("ticks", readers)
    assert spawn(WRITE, "0", "40000").wait() == 0
    for k, proc in enumerate(procs):
        assert proc.wait() == 0, proc.output()
        got = np.load(tmp_path / f"r{k}.npy")
        assert got.tolist() == list(range(40000)), f"reader {k}"
    if archive:  # one archive, written once, whichever reader wrote it
        assert pq.read_table(tmp_path / "hist").column("_seq").to_pylist() == list(range(40000))


def test_two_readers_in_one_process_each_see_every_tuple(con, spawn):
    con.sql("CREATE STREAM ticks (i BIGINT) WITH (capacity = 2000)")
    other = matchsql.connect(demo=False)
    got: dict[str, list[int]] = {}
    threads = [
        threading.Thread(
            target=lambda c=c, k=k: got.update({k: [r[0] for r in c.sql(EVERY_TUPLE).fetchall()]}),
            daemon=True,
        )
        for k, c in (("a", con), ("b", other))
    ]
    for thread in threads:
        thread.start()
    wait_for_readers("ticks", 2)
    assert spawn(WRITE, "0", "20000").wait() == 0
    for thread in threads:
        thread.join(WAIT_S)
    assert got["a"] == got["b"] == list(range(20000))
    other.close()


def test_the_slowest_reader_holds_the_ring(con, spawn):
    con.sql("CREATE STREAM ticks (i BIGINT)")
    slow = Ring.attach(Catalog(None).require("ticks").segment)
    try:
        slow.add_reader("ticks", "idle")  # registered, never reads: holds every tuple
        fast = threading.Thread(
            target=lambda: bounded(lambda: con.sql(EVERY_TUPLE).fetchall()), daemon=True
        )
        fast.start()
        wait_for_readers("ticks", 2)
        assert spawn(WRITE, "0", "3000").wait() == 0
        fast.join(WAIT_S)
        assert stream_word("ticks", W_TAIL_SEQ) == 0  # nothing freed past the idle reader
        readers = con.sql("SHOW STREAM READERS ticks").fetchall()
        assert [(r[2], r[6]) for r in readers] == [("idle", 3000)]  # name, lag
        shown = con.sql("SHOW STREAMS")
        names = shown.columns
        row = dict(zip(names, shown.fetchall()[0]))
        assert (row["readers"], row["max_lag"]) == (1, 3000)
    finally:
        slow.close()


def test_a_killed_reader_does_not_hold_the_others_for_ever(con, spawn, tmp_path):
    """The killed reader's cursor stays in the ring until its pid is seen dead; then the
    ring moves on and the producer, blocked on a full ring, gets room again."""
    con.sql("CREATE STREAM ticks (i BIGINT) WITH (capacity = 2000)")
    victim = spawn(READ, str(tmp_path / "victim.npy"))
    survivor = spawn(READ, str(tmp_path / "survivor.npy"))
    for proc in (victim, survivor):
        assert proc.proc.stdout.readline().strip() == "reading"
    wait_for_readers("ticks", 2)
    victim.proc.send_signal(signal.SIGSTOP)  # stops reading: the ring fills up behind it
    producer = spawn(WRITE, "0", "30000")
    time.sleep(0.5)
    assert producer.proc.poll() is None  # blocked by the stopped reader
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(WAIT_S)
    assert producer.wait() == 0, producer.output()
    assert survivor.wait() == 0, survivor.output()
    assert np.load(tmp_path / "survivor.npy").tolist() == list(range(30000))
    assert readers_of("ticks") == 0
