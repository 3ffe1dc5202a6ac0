"""CREATE STREAM / DROP STREAM / SHOW STREAMS, the registry, segment permissions, stale reclaim."""

from __future__ import annotations

import io
import os
import stat

import pyarrow as pa
import pytest

import matchsql
from matchsql.cli.shell import Shell
from matchsql.errors import CatalogError, ParseError, SemanticError, StreamError
from matchsql.storage.catalog import Catalog
from tests.streams.conftest import bounded


def _segment_file(name: str) -> str:
    return "/dev/shm" + Catalog(None).require(name).segment


def test_create_show_drop(con):
    con.sql(
        "CREATE STREAM trades (symbol VARCHAR(8), price DECIMAL(10,2), volume BIGINT, "
        "ts TIMESTAMP) WITH (capacity = 5000, on_full = 'spill')"
    )
    rows = con.sql("SHOW STREAMS").fetchall()
    assert len(rows) == 1
    name, columns, capacity, on_full = rows[0][:4]
    assert (name, capacity, on_full) == ("trades", 5000, "spill")
    assert columns == "symbol VARCHAR(8), price DECIMAL(10,2), volume BIGINT, ts TIMESTAMP"
    path = _segment_file("trades")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # owner-only segment
    con.sql("DROP STREAM trades")
    assert not os.path.exists(path)
    assert con.sql("SHOW STREAMS").fetchall() == []


def test_schema_comes_from_duckdb(con):
    con.sql("CREATE STREAM s (a INTEGER, b VARCHAR, c DECIMAL(10,2), d TIMESTAMP WITH TIME ZONE)")
    from matchsql.storage.shm_ring import Ring

    ring = Ring.attach(Catalog(None).require("s").segment)
    try:
        schema = ring.schema
    finally:
        ring.close()
    assert schema.types[:3] == [pa.int32(), pa.string(), pa.decimal128(10, 2)]
    assert pa.types.is_timestamp(schema.types[3])


@pytest.mark.parametrize(
    "sql, error, text",
    [
        ("CREATE STREAM s (a NOTATYPE)", SemanticError, "unknown or invalid type"),
        ("CREATE STREAM s (a INT, a INT)", ParseError, "appears twice"),
        ("CREATE STREAM s (_seq INT)", ParseError, "reserved"),
        ("CREATE STREAM s (a INT) WITH (speed = 3)", ParseError, "unknown stream option"),
        ("CREATE STREAM s (a INT) WITH (on_full = 'drop')", ParseError, "'block' or 'spill'"),
        (
            "CREATE STREAM s (a INT) WITH (capacity = 0)",
            ParseError,
            "capacity is a whole number of tuples from 1",
        ),
        (
            "CREATE STREAM s (a INT) WITH (archive_filter = 'a > 1')",
            SemanticError,
            "needs an archive",
        ),
        ("CREATE STREAM s (a INT", ParseError, "expected"),
        ("DROP STREAM nosuch", CatalogError, "does not exist"),
    ],
)
def test_ddl_errors(con, sql, error, text):
    with pytest.raises(error, match=text):
        con.sql(sql)
    assert con.sql("SHOW STREAMS").fetchall() == []


def test_exists_and_if_clauses(con):
    con.sql("CREATE STREAM s (a INT)")
    with pytest.raises(StreamError, match="already exists"):
        con.sql("CREATE STREAM s (a INT)")
    con.sql("CREATE STREAM IF NOT EXISTS s (a INT)")
    con.sql("DROP STREAM s")
    con.sql("DROP STREAM IF EXISTS s")
    con.sql("CREATE TABLE t (a INT)")
    with pytest.raises(CatalogError, match="table or view"):
        con.sql("CREATE STREAM t (a INT)")


def test_unknown_stream_for_producer():
    from matchsql.storage import Producer

    with pytest.raises(CatalogError, match="does not exist"):
        Producer.open("nosuch")


def test_stale_stream_of_a_crashed_owner_is_reclaimed(spawn, tmp_path):
    # A database file of its own, so that its registry entry is this test's alone.
    database = str(tmp_path / "own.duckdb")
    owner = spawn(
        """
        import os, sys, matchsql
        con = matchsql.connect(sys.argv[1], demo=False)
        con.sql("CREATE STREAM orphan (a INT)")
        print(matchsql.storage.catalog.Catalog(sys.argv[1]).require("orphan").segment,
              flush=True)
        os._exit(0)  # no clean-up: like a crash
    """,
        database,
    )
    assert owner.wait() == 0
    segment = owner.output().strip()
    # The segment is left behind by the "crash"; any process's orphan sweep (another
    # test's, in parallel) may remove it first, so only the outcome is asserted.
    con = matchsql.connect(database, demo=False)
    try:
        assert con.sql("SHOW STREAMS").fetchall() == []  # detected and reclaimed
        assert not os.path.exists("/dev/shm" + segment)
        con.sql("CREATE STREAM orphan (a INT)")  # the name is free again
        con.sql("DROP STREAM orphan")
    finally:
        con.close()


def test_streams_dot_command(con):
    con.sql("CREATE STREAM ticks (x DOUBLE)")
    out = io.StringIO()
    shell = Shell(con, out=out, err=out)
    assert bounded(lambda: shell.run_dot(".streams"))
    assert "ticks" in out.getvalue() and "x DOUBLE" in out.getvalue()
