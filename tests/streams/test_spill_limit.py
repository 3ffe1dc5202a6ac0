"""``max_spill``: the spill files of an ``on_full = 'spill'`` stream are bounded.

The default is a quarter of the free space of the spill directory's disk at
creation, recorded in the registry; an explicit value is checked against its
range; a write that would pass the limit fails cleanly, and once a reader
catches up the same batch completes with no tuple lost or duplicated.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from matchsql.errors import ParseError, StreamError, StreamWriteError
from matchsql.grammar.stream_ddl import MAX_SPILL_MAX, MAX_SPILL_MIN
from matchsql.storage import Producer
from matchsql.storage.catalog import Catalog, default_max_spill
from matchsql.storage.shm_ring import W_HEAD_SEQ, W_SPILLED
from matchsql.storage.spill import SpillSpace, spill_path
from matchsql.storage.stream_lifecycle import create_stream
from tests.streams.conftest import WAIT_S, bounded, stream_word

TICKS = "CREATE STREAM ticks (i BIGINT, r BIGINT)"
SCHEMA = pa.schema([("i", pa.int64()), ("r", pa.int64())])
RANGE = r"max_spill is a number of bytes from 65,536 \(64 KiB\) to 1,152,921,504,606,846,976"


def ticks(start: int, stop: int) -> pa.Table:
    """Tuples ``i`` = start..stop-1 with a random column, so spill files do not compress
    to nothing (each 10,000 tuples take about 80 KB)."""
    random = np.random.default_rng(start).integers(0, 1 << 62, stop - start)
    return pa.table(
        {"i": pa.array(range(start, stop), pa.int64()), "r": pa.array(random, pa.int64())}
    )


def show(con) -> dict:
    result = con.sql("SHOW STREAMS")
    rows = result.fetchall()
    assert len(rows) == 1
    return dict(zip(result.columns, rows[0]))


def spill_files(name: str = "ticks") -> list[Path]:
    directory = Path(Catalog(None).require(name).spill_dir)
    return sorted(directory.glob("*.parquet")) if directory.exists() else []


def registry_entry(name: str = "ticks") -> Path:
    return Catalog(None).directory / f"{name}.json"


def write_until_done(producer: Producer, table: pa.Table, batch_id: int) -> None:
    """Retry ``table`` (same batch id) until it is all in, as readers make room."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            producer.write_batch(table, batch_id=batch_id)
            return
        except StreamWriteError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_the_default_is_a_quarter_of_the_free_space_and_is_recorded(con, runtime_dir, scratch_fs):
    fs = scratch_fs(runtime_dir)  # the registry, and so the spill directory, on a small disk
    if not fs.mounted:
        pytest.skip("a disk of known free space needs a tmpfs mount (root)")
    con.sql(TICKS + " WITH (capacity = 10000, on_full = 'spill')")
    stats = os.statvfs(fs.path)
    expected = stats.f_bavail * stats.f_frsize // 4
    limit = show(con)["max_spill"]
    # The registry entry (one page) was written after the limit was taken.
    assert abs(limit - expected) <= max(4096, expected // 100)
    assert json.loads(registry_entry().read_text())["max_spill"] == limit
    # Producers enforce the recorded limit, not what is free when they write.
    producer = Producer.open("ticks")
    with pytest.raises(StreamWriteError) as err:
        producer.write_batch(ticks(0, 200_000), batch_id=1)
    assert f"reached its spill limit, max_spill = {limit:,} bytes" in err.value.message
    assert "No space left" not in err.value.message
    assert sum(p.stat().st_size for p in spill_files()) <= limit
    producer.close()


def test_a_block_stream_has_no_spill_limit(con):
    con.sql(TICKS)
    row = show(con)
    assert (row["on_full"], row["max_spill"], row["spill_bytes"]) == ("block", None, None)
    assert json.loads(registry_entry().read_text())["max_spill"] is None


@pytest.mark.parametrize(
    "value, expected",
    [
        ("262144", 262_144),
        ("1e6", 1_000_000),
        ("256 KiB", 262_144),
        ("2MB", 2_000_000),
        ("'1.5 GiB'", 1_610_612_736),
        ("65535.5", 65_536),
        ("'1 EiB'", MAX_SPILL_MAX),
    ],
)
def test_an_explicit_max_spill(con, value, expected):
    con.sql(TICKS + f" WITH (on_full = 'spill', max_spill = {value})")
    row = show(con)
    assert (row["max_spill"], row["spill_bytes"]) == (expected, 0)
    assert Catalog(None).require("ticks").max_spill == expected


@pytest.mark.parametrize(
    "value, message",
    [
        ("1e400", "max_spill = 1e400 is too large: it rounds to infinity; " + RANGE),
        ("0.4", "max_spill = 0.4 rounds to 0 bytes; " + RANGE),
        ("1e-400", "max_spill = 1e-400 rounds to 0 bytes; " + RANGE),
        ("65535", "max_spill = 65535 is out of range; " + RANGE),
        ("2e18", "max_spill = 2e18 is out of range; " + RANGE),
        ("-5", "max_spill takes a number of bytes; " + RANGE),
        ("'lots'", "max_spill = 'lots' is not a size; " + RANGE),
        ("'3 parsecs'", "max_spill = '3 parsecs' is not a size; " + RANGE),
        ("'0 GB'", "max_spill = 0 GB rounds to 0 bytes; " + RANGE),
    ],
)
def test_a_max_spill_out_of_its_range_is_a_parse_error_at_the_value(con, value, message):
    sql = TICKS + f" WITH (on_full = 'spill', max_spill = {value})"
    with pytest.raises(ParseError, match=message) as err:
        con.sql(sql)
    assert (err.value.line, err.value.column) == (1, sql.index(value) + 1)
    assert con.sql("SHOW STREAMS").fetchall() == []


@pytest.mark.parametrize(
    "options, message, at",
    [
        (
            "on_full = 'spill', max_spill = 1e6, max_spill = 2e6",
            "max_spill is given twice",
            "max_spill = 2e6",
        ),
        (
            "capacity = 10, on_full = 'spill', capacity = 20",
            "capacity is given twice",
            "capacity = 20",
        ),
        (
            "max_spill = 1e6",
            "max_spill bounds the spill files of an on_full = 'spill' stream",
            "max_spill",
        ),
        (
            "on_full = 'block', max_spill = 1e6",
            "this stream blocks when full and never spills",
            "max_spill",
        ),
    ],
)
def test_duplicate_options_and_a_limit_without_spill_are_parse_errors(con, options, message, at):
    sql = TICKS + f" WITH ({options})"
    with pytest.raises(ParseError, match=message) as err:
        con.sql(sql)
    assert err.value.column == sql.index(at) + 1
    assert con.sql("SHOW STREAMS").fetchall() == []


@pytest.mark.parametrize(
    "value, message",
    [
        (0.3, "rounds to 0 bytes"),
        (float("inf"), "rounds to infinity"),
        pytest.param(10**400, "rounds to infinity", id="10**400"),
        (100, "out of range"),
        (True, "takes a number of bytes"),
        ("1 lightyear", "not a size"),
    ],
)
def test_the_python_api_checks_max_spill_too(value, message):
    with pytest.raises(StreamError, match=message):
        create_stream(
            duckdb.connect(),
            None,
            "ticks",
            [("i", "BIGINT"), ("r", "BIGINT")],
            SCHEMA,
            on_full="spill",
            max_spill=value,
        )
    with pytest.raises(StreamError, match="never spills"):
        create_stream(
            duckdb.connect(),
            None,
            "ticks",
            [("i", "BIGINT"), ("r", "BIGINT")],
            SCHEMA,
            max_spill=1 << 20,
        )
    assert Catalog(None).get("ticks") is None
    definition = create_stream(
        duckdb.connect(),
        None,
        "ticks",
        [("i", "BIGINT"), ("r", "BIGINT")],
        SCHEMA,
        on_full="spill",
        max_spill="1 MiB",
    )
    assert definition is not None and definition.max_spill == 1 << 20


def test_a_write_past_the_limit_fails_and_a_reader_catching_up_loses_nothing(con):
    con.sql(TICKS + " WITH (capacity = 10000, on_full = 'spill', max_spill = 256 KiB)")
    data = ticks(0, 60_000)
    producer = Producer.open("ticks")
    with pytest.raises(StreamWriteError) as err:
        producer.write_batch(data, batch_id=1)
    written = err.value.rows_written
    assert 10_000 < written < 60_000  # the ring (10,000 tuples), then some spill files
    assert err.value.message.startswith(
        "stream 'ticks' reached its spill limit, max_spill = 262,144 bytes (256 KiB): "
        "readers still need "
    )
    assert (
        "a reader must catch up with the stream (spill files go as they are read), or "
        "create the stream again with a larger max_spill; the first "
        f"{written} of the batch's 60000 rows were written"
    ) in err.value.message
    # What was written is published, whole, within the limit; nothing else is on disk.
    files = spill_files()
    assert sum(p.stat().st_size for p in files) <= 262_144
    assert sorted(files[0].parent.iterdir()) == files
    assert stream_word("ticks", W_HEAD_SEQ) == written
    assert stream_word("ticks", W_SPILLED) == written - 10_000
    row = show(con)
    assert row["spill_bytes"] == sum(p.stat().st_size for p in files)
    # The same batch again (a retry resumes after its first ``written`` rows) fails the
    # same way while nobody reads, and writes nothing more.
    with pytest.raises(StreamWriteError, match=f"the first {written} of the batch's 60000"):
        producer.write_batch(data, batch_id=1)
    assert stream_word("ticks", W_HEAD_SEQ) == written

    # The reader drains the spill files (they count no more), so the rest goes in.
    got = drained_while_writing(con, producer, data)
    assert [i for i, _ in got] == list(range(60_000))  # none lost, none twice
    assert [r for _, r in got] == data.column("r").to_pylist()
    assert show(con)["spill_bytes"] == 0


def drained_while_writing(con, producer: Producer, data: pa.Table) -> list[tuple[int, int]]:
    """A reader drains the stream while the rest of batch 1 is written; what it read."""
    got: list[tuple[int, int]] = []
    reader = threading.Thread(
        target=lambda: got.extend(bounded(con.sql("SELECT i, r FROM ticks").fetchall)), daemon=True
    )
    reader.start()
    write_until_done(producer, data, batch_id=1)
    producer.close()
    reader.join(WAIT_S)
    return got


def test_a_frame_larger_than_the_limit_is_spilled_in_smaller_files(con):
    # Frames of 20,000 tuples take about 320 KB as a spill file: more than max_spill.
    con.sql(TICKS + " WITH (capacity = 20000, on_full = 'spill', max_spill = 100 KiB)")
    data = ticks(0, 60_000)
    producer = Producer.open("ticks")
    with pytest.raises(StreamWriteError, match="reached its spill limit") as err:
        producer.write_batch(data, batch_id=1)
    written = err.value.rows_written
    assert 20_000 < written < 40_000  # the ring, then files of a part of the second frame
    assert sum(p.stat().st_size for p in spill_files()) <= 100 * 1024
    got = drained_while_writing(con, producer, data)
    assert [i for i, _ in got] == list(range(60_000))


def test_a_tuple_larger_than_the_limit_says_so(con):
    con.sql(
        "CREATE STREAM ticks (s VARCHAR) WITH (capacity = 1, on_full = 'spill', max_spill = 64 KiB)"
    )
    noise = np.random.default_rng(0).integers(0, 1 << 62, 20_000).tobytes().hex()
    with Producer.open("ticks") as producer:
        producer.write_batch({"s": ["small"]})  # the ring holds one tuple
        with pytest.raises(
            StreamWriteError,
            match=r"a tuple of stream 'ticks' takes [\d,]+ "
            r"bytes in a spill file, more than its max_spill = 65,536 bytes "
            r"\(64 KiB\); create the stream again with a larger max_spill; "
            "none of the batch's 1 rows was written",
        ):
            producer.write_batch({"s": [noise]})
    assert con.sql("SELECT s FROM ticks").fetchall() == [("small",)]


def test_spill_released_by_every_reader_does_not_count(tmp_path):
    directory = tmp_path / "ticks.spill"
    directory.mkdir()
    for first, size in ((0, 1000), (100, 2000), (250, 4000)):
        spill_path(str(directory), first).write_bytes(b"x" * size)
    (directory / "00000000000000000300.tmp123").write_bytes(b"x" * 8000)  # being written
    space = SpillSpace(str(directory))
    assert space.in_use(0) == 7000
    assert space.in_use(100) == 6000  # tuples 0..99 were released by every reader
    spill_path(str(directory), 100).unlink()  # a reader deleted what it released
    assert space.in_use(100) == 4000
    assert SpillSpace(str(tmp_path / "none")).in_use(0) == 0  # nothing spilled yet


def test_an_entry_without_a_limit_gets_the_default(con):
    """A registry entry of an older matchsql has no max_spill: producers use the default."""
    con.sql(TICKS + " WITH (on_full = 'spill')")
    path = registry_entry()
    entry = json.loads(path.read_text())
    del entry["max_spill"]
    entry["from_the_future"] = 1  # and fields of a newer one are ignored
    path.write_text(json.dumps(entry))
    definition = Catalog(None).require("ticks")
    assert definition.max_spill is None
    assert definition.spill_limit == default_max_spill(Path(definition.spill_dir))
    assert MAX_SPILL_MIN <= show(con)["max_spill"] <= MAX_SPILL_MAX
    with Producer.open("ticks") as producer:
        producer.write_batch(ticks(0, 10))
    assert con.sql("SELECT count(*) FROM ticks").fetchall() == [(10,)]
