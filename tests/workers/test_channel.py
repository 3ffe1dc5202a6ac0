"""The shared-memory channel: order, wrap-around, oversized payloads, back-pressure."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

import pyarrow as pa

import matchsql
from matchsql.execution.workers.channel import MAX_NOTICES, RingReader, RingWriter
from matchsql.execution.workers.frames import pack, unpack


def _pair(capacity: int) -> tuple[RingWriter, RingReader]:
    receive, send = mp.Pipe(duplex=False)
    writer = RingWriter(send, capacity)
    return writer, RingReader(receive, writer.name, capacity)


def test_payloads_arrive_in_order_across_the_wrap() -> None:
    writer, reader = _pair(1_000)
    try:
        sizes = [300, 450, 100, 499, 1, 0, 250, 499, 2_000]  # 2_000 > capacity/2: own segment
        for round_ in range(3):
            for i, size in enumerate(sizes):
                writer.send("x", bytes([i]) * size, (round_, i))
                kind, payload, extra = reader.receive()
                assert (kind, extra) == ("x", (round_, i))
                assert payload == bytes([i]) * size
    finally:
        reader.close()
        writer.close()


def test_writer_waits_for_the_reader() -> None:
    writer, reader = _pair(4_096)
    got: list[bytes] = []

    def consume() -> None:
        for _ in range(MAX_NOTICES * 3):
            got.append(reader.receive()[1])

    thread = threading.Thread(target=consume)
    thread.start()
    for i in range(MAX_NOTICES * 3):  # more notices and bytes than ring and pipe hold
        writer.send("x", i.to_bytes(4, "little") * 200)
    thread.join(30)
    assert [int.from_bytes(p[:4], "little") for p in got] == list(range(MAX_NOTICES * 3))
    reader.close()
    writer.close()


def test_frames_round_trip() -> None:
    batch = pa.RecordBatch.from_pydict({"a": [1, 2, 3], "b": ["x", None, "z"]})
    entries = [(0, 5, ("k", None), 2, False), (1, 9, (3,), 1, True)]
    got_entries, got_batches = unpack(bytes(pack(entries, [batch, batch.slice(1)])))
    assert got_entries == entries
    assert [b.to_pylist() for b in got_batches] == [batch.to_pylist(), batch.slice(1).to_pylist()]


def test_workers_setting_and_show_workers() -> None:
    con = matchsql.connect(demo=False)
    try:
        # SHOW WORKERS is the pool's table; the setting reads through current_setting.
        assert con.sql("SELECT current_setting('workers')").fetchall() == [(1,)]
        assert con.sql("SHOW WORKERS").fetchall() == []  # no pool before a query needs one
        con.sql("SET workers = auto")
        assert con.sql("SELECT current_setting('workers')").fetchall() == [(os.cpu_count(),)]
        con.sql("SET workers = 2")
        con.sql("CREATE TABLE t AS SELECT i % 10 AS p, i AS ts FROM range(100) r(i)")
        rows = con.sql(
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
            "MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A+) "
            "DEFINE A AS true)"
        ).fetchall()
        assert sorted(rows) == [(p, 10) for p in range(10)]
        show = con.sql("SHOW WORKERS").arrow().to_pylist()
        assert [r["worker"] for r in show] == [0, 1]
        assert all(r["alive"] for r in show)
        buckets = [b for r in show for b in r["buckets"].split(",") if b]
        assert len(buckets) == len(set(buckets)) > 1  # each bucket on one worker
        assert sum(r["rows_matched"] for r in show) == 100
        try:
            con.sql("SET workers = 0")
        except matchsql.Error as err:
            assert "workers" in err.message
        else:
            raise AssertionError("workers = 0 accepted")
    finally:
        con.close()


def test_a_drained_ring_starts_again_at_its_start() -> None:
    writer, reader = _pair(1_000)
    try:
        starts = []
        for i, size in enumerate([100, 200, 150, 100, 300]):
            writer.send("x", bytes([i]) * size)
            starts.append(writer._written - size)
            assert reader.receive()[1] == bytes([i]) * size
        # each payload found the ring empty and its start free again
        assert [start % 1_000 for start in starts] == [0, 0, 0, 0, 0]
        writer.send("x", b"a" * 100)
        writer.send("x", b"b" * 100)  # the first one is not read yet: goes after it
        assert writer._written % 1_000 == 200
        assert [reader.receive()[1] for _ in range(2)] == [b"a" * 100, b"b" * 100]
    finally:
        reader.close()
        writer.close()
