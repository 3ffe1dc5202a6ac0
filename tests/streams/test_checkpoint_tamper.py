"""A checkpoint is data: a tampered one makes its query fail with a clear error, and
opening the database runs nothing it names."""

from __future__ import annotations

import pickle
import struct
import time
import zlib

import duckdb
import pytest

import matchsql
from matchsql.storage import Producer
from tests.streams.conftest import WAIT_S
from tests.streams.test_continuous_queries import PATTERN, SINK, data, db, wait_state  # noqa: F401

TABLE = "__matchsql_continuous_queries"


class _Payload:
    """Unpickling this creates the file ``path`` (what a hostile snapshot would do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def checkpointed(db: str) -> bytes:  # noqa: F811 - the fixture's value
    """Run a continuous query to a checkpoint with matcher state, stop it: its snapshot."""
    con = matchsql.connect(db)
    con.sql(SINK)
    con.create_continuous_query(
        "rising", f"INSERT INTO sink SELECT * FROM ticks {PATTERN}", checkpoint_rows=1000
    )
    with Producer.open("ticks", database=db, name="p") as producer:
        producer.write_batch(data(0, 3000), batch_id=0)
        deadline = time.monotonic() + WAIT_S
        while wait_state(con, "rising", "running")["position"] < 3000:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        con.stop_continuous_query("rising")
    con.close()
    with duckdb.connect(db) as raw:
        ((saved,),) = raw.execute(f"SELECT snapshot FROM {TABLE}").fetchall()
    assert saved
    return bytes(saved)


def reseal(snapshot: bytes, old: bytes, new: bytes) -> bytes:
    """``snapshot`` with ``old`` replaced by ``new`` in its tree, with a valid header."""
    head = struct.Struct("<8sHIQI")
    magic, version, _, tree_size, count = head.unpack_from(snapshot)
    tree = snapshot[head.size : head.size + tree_size]
    assert old in tree
    tree = tree.replace(old, new)
    body = tree + snapshot[head.size + tree_size :]
    return head.pack(magic, version, zlib.crc32(body), len(tree), count) + body


def tamper(db: str, snapshot: bytes) -> None:  # noqa: F811
    """Write ``snapshot`` as the query's checkpoint, as if its process had died running."""
    with duckdb.connect(db) as raw:
        raw.execute(
            f"UPDATE {TABLE} SET snapshot = ?, state = 'running', owner_pid = 0", [snapshot]
        )


def failed_on_connect(db: str) -> str:  # noqa: F811
    """Connect (which resumes the query) and wait until it fails: its error."""
    con = matchsql.connect(db)
    deadline = time.monotonic() + WAIT_S
    try:
        while (row := con.sql(f"SELECT state, error FROM {TABLE}").fetchall()[0])[0] != "failed":
            assert row[0] == "running", row
            assert time.monotonic() < deadline, row
            time.sleep(0.02)
    finally:
        con.close()
    return row[1]


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("pickle", "is a Python pickle, which matchsql never loads"),
        ("truncated", "truncated"),
        ("version", "format version 99; this matchsql reads version 1"),
        ("class", "which is not a matcher state class of this matchsql"),
    ],
)
def test_a_tampered_checkpoint_runs_nothing_and_says_what_is_wrong(
    db,  # noqa: F811
    tmp_path,
    kind,
    message,
):
    saved = checkpointed(db)
    marker = tmp_path / "created-by-the-snapshot"
    if kind == "pickle":
        snapshot = pickle.dumps(_Payload(str(marker)))
        pickle.loads(snapshot).close()  # the payload does create the file when unpickled
        marker.unlink()
    elif kind == "truncated":
        snapshot = saved[: len(saved) // 2]
    elif kind == "version":
        snapshot = saved[:8] + struct.pack("<H", 99) + saved[10:]
    else:  # a class name the registry does not hold where the matcher's was, resealed
        snapshot = reseal(
            saved, b"matchsql.engine.compiled.compiled_matcher.CompiledMatcher", b"builtins.open"
        )
    tamper(db, snapshot)
    error = failed_on_connect(db)
    assert message in error
    assert "snapshot" in error
    assert not marker.exists()
