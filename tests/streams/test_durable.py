"""The live store as a durable log: end of stream for every reader,
partial writes that say what they wrote, and I/O failures that are clean and lose nothing."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from matchsql.errors import StreamError, StreamWriteError
from matchsql.storage import Producer
from matchsql.storage.catalog import Catalog
from matchsql.storage.shm_ring import W_HEAD_SEQ, W_TAIL_SEQ, Ring
from tests.streams.conftest import bounded, stream_word

TICKS = "CREATE STREAM ticks (i BIGINT)"
# One output row per tuple, so a query's rows are exactly the tuples it was given.
EVERY_TUPLE = (
    "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE)"
)
WRITE = """
    import sys
    from matchsql.storage import Producer
    start, stop = int(sys.argv[1]), int(sys.argv[2])
    with Producer.open("ticks") as producer:
        for low in range(start, stop, 250):
            producer.write_batch({"i": list(range(low, min(low + 250, stop)))})
"""


def delivered(con) -> list[int]:
    return [row[0] for row in bounded(con.sql(EVERY_TUPLE).fetchall, 30)]


def ticks(start: int, stop: int) -> pa.Table:
    return pa.table({"i": pa.array(range(start, stop), pa.int64())})


def test_a_second_reader_of_an_ended_stream_replays_the_archive_and_ends(con, spawn, tmp_path):
    con.sql(TICKS + f" WITH (archive = '{tmp_path / 'hist'}/')")
    assert spawn(WRITE, "0", "700").wait() == 0
    assert delivered(con) == list(range(700))
    # Everything was read and the producer closed: the stream has ended, so a
    # second query gives the archived history and then ends as well.
    assert delivered(con) == list(range(700))


def test_a_timed_out_batch_says_how_many_rows_it_wrote(con):
    con.sql(TICKS + " WITH (capacity = 1000)")  # on_full = 'block', and no reader
    producer = Producer.open("ticks")
    with pytest.raises(StreamWriteError, match="the first 1000 of the batch's 5000 rows") as err:
        producer.write_batch(ticks(0, 5000), batch_id=1, timeout=0.3)
    assert err.value.rows_written == 1000
    assert stream_word("ticks", W_HEAD_SEQ) == 1000
    # The same batch again (same batch_id) writes exactly the rest, once a reader frees room.
    reader = threading.Thread(target=lambda: got.extend(delivered(con)), daemon=True)
    got: list[int] = []
    reader.start()
    assert producer.write_batch(ticks(0, 5000), batch_id=1, timeout=30)
    producer.close()
    reader.join(30)
    assert got == list(range(5000))


def test_a_batch_that_never_fit_reports_none_written(con):
    con.sql(TICKS + " WITH (capacity = 1000)")
    with Producer.open("ticks") as producer:
        producer.write_batch(ticks(0, 1000))  # fills the ring
        with pytest.raises(StreamWriteError, match="none of the batch's 10 rows") as err:
            producer.write_batch(ticks(1000, 1010), timeout=0.2)
        assert err.value.rows_written == 0
    assert delivered(con) == list(range(1000))


def test_the_archive_is_owner_only(con, spawn, tmp_path):
    directory = tmp_path / "new" / "hist"
    con.sql(TICKS + f" WITH (archive = '{directory}/')")
    assert spawn(WRITE, "0", "300").wait() == 0
    assert delivered(con) == list(range(300))
    files = list(directory.glob("part-*.parquet"))
    assert files
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.parent.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


def test_a_read_only_archive_path_is_a_clean_error(con, scratch_fs):
    fs = scratch_fs()
    fs.readonly()
    with pytest.raises(
        StreamError,
        match=f"cannot create the archive of stream 'ticks' at "
        f"{fs.path}/hist: (Read-only file system|Permission denied)",
    ):
        con.sql(TICKS + f" WITH (archive = '{fs.path}/hist/')")


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_an_archive_that_cannot_be_written_loses_nothing(con, spawn, scratch_fs, fault):
    fs = scratch_fs()
    con.sql(TICKS + f" WITH (archive = '{fs.path}/hist/')")
    assert spawn(WRITE, "0", "3000").wait() == 0
    filler = fs.fill() if fault == "full" else None
    if fault == "read-only":
        fs.readonly()
    cause = "No space left on device" if filler else "(Read-only file system|Permission denied)"
    with pytest.raises(
        StreamError,
        match=f"cannot append to the archive of stream 'ticks' at "
        f"{fs.path}/hist/part-0+.parquet: {cause}",
    ):
        delivered(con)
    if filler:
        filler.unlink()
    else:
        fs.readonly(False)
    # Nothing was released from the ring: the next query gets every tuple, once.
    assert delivered(con) == list(range(3000))
    assert pq.read_table(fs.path / "hist").column("_seq").to_pylist() == list(range(3000))


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_spill_directory_that_cannot_be_written_loses_nothing(con, scratch_fs, fault):
    con.sql(TICKS + " WITH (capacity = 100, on_full = 'spill')")
    fs = scratch_fs(Path(Catalog(None).require("ticks").spill_dir))
    filler = fs.fill() if fault == "full" else None
    if fault == "read-only":
        fs.readonly()
    producer = Producer.open("ticks")
    cause = "No space left on device" if filler else "(Read-only file system|Permission denied)"
    with pytest.raises(
        StreamWriteError,
        match=f"cannot write spill file {fs.path}/0+100.parquet:"
        f" {cause}; the first 100 of the batch's 1000 rows were written",
    ) as err:
        producer.write_batch(ticks(0, 1000), batch_id=1)
    assert err.value.rows_written == 100
    assert [p.name for p in fs.path.iterdir() if p.name != "filler"] == []  # no partial file
    if filler:
        filler.unlink()
    else:
        fs.readonly(False)
    assert producer.write_batch(ticks(0, 1000), batch_id=1)  # the rest, now spilled
    producer.close()
    assert delivered(con) == list(range(1000))


def test_a_reader_killed_while_releasing_leaves_a_readable_ring(con, spawn):
    """Releasing stores TAIL_SEQ, then TAIL_BYTES: the next reader mends a death in between."""
    con.sql(TICKS)
    assert spawn(WRITE, "0", "750").wait() == 0  # three frames of 250
    ring = Ring.attach(Catalog(None).require("ticks").segment)
    try:
        ring.set_word(W_TAIL_SEQ, 250)  # the first frame released, its bytes not yet
    finally:
        ring.close()
    assert delivered(con) == list(range(250, 750))


def test_a_slow_producer_does_not_make_a_parquet_file_per_frame(con, spawn, tmp_path):
    """Waiting for tuples is not a reason to write the archive: it flushes each second,
    or at once when a writer waits for room."""
    con.sql(TICKS + f" WITH (archive = '{tmp_path / 'hist'}/')")
    trickle = spawn("""
        import time
        from matchsql.storage import Producer
        with Producer.open("ticks") as producer:
            for low in range(0, 200, 10):
                producer.write_batch({"i": list(range(low, low + 10))})
                time.sleep(0.01)
    """)
    assert delivered(con) == list(range(200))
    assert trickle.wait() == 0
    assert len(list((tmp_path / "hist").glob("part-*.parquet"))) <= 3
