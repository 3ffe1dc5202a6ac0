"""Every setting and statement option has a range, checked when it is given: a value that
would break a later statement (a hundred thousand workers, a limit past int64, a checkpoint
interval that rounds to 0 or to infinity, a sink the first checkpoint cannot write) is
refused at once, with the range or the cause, and nothing is left half made."""

from __future__ import annotations

import duckdb
import pytest

import matchsql
from matchsql.config import WHOLE_RANGES, Config
from matchsql.errors import Error, ParseError, SemanticError, StreamError
from matchsql.storage import shm_ring
from matchsql.storage.stream_lifecycle import create_stream
from tests.streams import test_continuous_queries as continuous
from tests.streams.test_continuous_queries import COLUMNS, PATTERN, SCHEMA, SINK

BODY = f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
db = continuous.db  # the fixture: a file database whose stream 'ticks' has an archive


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("workers", "100000"),
        ("workers", "0"),
        ("threads", "1000000"),
        ("max_buffered_rows", "9223372036854775808"),
        ("max_pattern_size", "100000000000"),
        ("batch_size", "-1"),
        ("split_rows", "1e30"),
        ("adaptive_u", "2.5"),
        ("max_threads", "'ten'"),
        ("gpu_min_work", "9" * 5000),
    ],
)
def test_a_whole_number_setting_out_of_its_range_is_refused_and_nothing_changes(setting, value):
    con = matchsql.connect(demo=False)
    before = con.sql(f"SELECT current_setting('{setting}')").fetchall()
    low, high = WHOLE_RANGES[setting]
    with pytest.raises(
        Error, match=f"setting '{setting}' must be a whole number from {low:,} to {high:,}"
    ):
        con.sql(f"SET {setting} = {value}")
    assert con.sql(f"SELECT current_setting('{setting}')").fetchall() == before
    # The next statement runs as before the refused SET.
    con.sql("CREATE TABLE t AS SELECT range AS i FROM range(5)")
    rows = con.sql(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES count(*) AS n "
        "PATTERN (A+) DEFINE A AS true)"
    ).fetchall()
    assert rows == [(5,)]
    con.close()


def test_the_ends_of_each_range_are_accepted():
    for setting, (low, high) in WHOLE_RANGES.items():
        config = Config()
        config.set(setting, str(low))
        config.set(setting, f"+{high}")
        assert getattr(config, setting) == high


def test_connect_checks_its_settings_too():
    with pytest.raises(
        Error, match="setting 'workers' must be a whole number from 1 to 64 or auto"
    ):
        matchsql.connect(demo=False, workers=100_000)
    with pytest.raises(Error, match="setting 'execution_path' must be one of auto, reference"):
        matchsql.connect(demo=False, execution_path="fastest")
    assert matchsql.connect(demo=False, input_mode="PUSH").sql(
        "SELECT current_setting('input_mode')"
    ).fetchall() == [("push",)]


@pytest.mark.parametrize(
    ("options", "message", "at"),
    [
        (
            "checkpoint_interval = 1e-400",
            "checkpoint_interval must be 0 \\(none\\) or a number of "
            "seconds from 0.001 to 1,000,000, got 1e-400",
            "1e-400",
        ),
        ("checkpoint_interval = 1e400", "checkpoint_interval must be .*, got 1e400", "1e400"),
        ("checkpoint_interval = 0.0001", "checkpoint_interval must be .*, got 0.0001", "0.0001"),
        (
            "checkpoint_rows = 1e30",
            "checkpoint_rows must be 0 \\(none\\) or a whole number of "
            "tuples from 1 to 1,000,000,000,000, got 1e30",
            "1e30",
        ),
        ("checkpoint_rows = 2.5", "checkpoint_rows must be .*, got 2.5", "2.5"),
        (
            "checkpoint_rows = 5, checkpoint_rows = 7",
            "checkpoint_rows is given twice",
            "checkpoint_rows = 7",
        ),
    ],
)
def test_continuous_query_options_out_of_range_are_refused_where_they_stand(
    db, options, message, at
):
    con = matchsql.connect(db)
    con.sql(SINK)
    statement = f"CREATE CONTINUOUS QUERY q WITH ({options}) AS {BODY}"
    with pytest.raises(ParseError, match=message) as err:
        con.sql(statement)
    assert err.value.column == statement.index(at) + 1
    assert con.sql("SHOW CONTINUOUS QUERIES").fetchall() == []
    con.close()


@pytest.mark.parametrize(
    "options",
    [
        {"checkpoint_interval": float("inf")},
        {"checkpoint_interval": float("nan")},
        {"checkpoint_interval": 1e-9},
        {"checkpoint_rows": 10**13},
        {"checkpoint_rows": True},
        {"checkpoint_rows": 2.5},
    ],
)
def test_the_python_api_checks_the_same_ranges(db, options):
    con = matchsql.connect(db)
    con.sql(SINK)
    key = next(iter(options))
    with pytest.raises(SemanticError, match=f"{key} must be 0 \\(none\\) or"):
        con.create_continuous_query("q", BODY, **options)
    assert con.sql("SHOW CONTINUOUS QUERIES").fetchall() == []
    con.close()


def test_in_range_options_are_kept_exactly(db):
    con = matchsql.connect(db)
    con.sql(SINK)
    con.sql(
        f"CREATE CONTINUOUS QUERY q WITH (checkpoint_interval = 0.25, checkpoint_rows = "
        f"1000000000000) AS {BODY}"
    )
    shown = con.sql("SHOW CONTINUOUS QUERIES")
    row = dict(zip(shown.columns, shown.fetchall()[0]))
    assert (row["checkpoint_interval"], row["checkpoint_rows"]) == (0.25, 10**12)
    con.sql("DROP CONTINUOUS QUERY q")
    con.close()


@pytest.mark.parametrize(
    ("sink", "message", "name"),
    [
        ("nosuch", "Table with name nosuch does not exist", "nosuch"),
        ("nosch.sink", 'schema "nosch" does not exist', "nosch"),
        ("ticks", "Table with name ticks does not exist", "ticks"),  # the stream is no table
        ("narrow", 'table "narrow" has 1 columns but 4 values were supplied', "narrow"),
        ("view_sink", "view_sink is not an table", "view_sink"),
        (
            "__matchsql_continuous_queries",
            "__matchsql_continuous_queries is matchsql's own table",
            "__matchsql_continuous_queries",
        ),
    ],
)
def test_a_sink_the_query_cannot_write_is_refused_at_create(db, sink, message, name):
    con = matchsql.connect(db)
    con.sql(SINK)
    con.sql("CREATE TABLE narrow (k BIGINT)")
    con.sql("CREATE VIEW view_sink AS SELECT * FROM sink")
    statement = f"CREATE CONTINUOUS QUERY q AS INSERT INTO {sink} SELECT * FROM ticks {PATTERN}"
    with pytest.raises(SemanticError, match=message) as err:
        con.sql(statement)
    assert err.value.column == statement.index(name) + 1  # the caret under the sink's name
    rows = con.sql("SELECT count(*) FROM __matchsql_continuous_queries").fetchall()
    assert rows == [(0,)]
    # A sink that fits is taken, and the query runs.
    con.sql(f"CREATE CONTINUOUS QUERY q AS {BODY}")
    assert [r[0] for r in con.sql("SHOW CONTINUOUS QUERIES").fetchall()] == ["q"]
    con.sql("DROP CONTINUOUS QUERY q")
    con.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("capacity = 0", "capacity is a whole number of tuples from 1 to 1,073,741,824, got 0"),
        ("capacity = 4294967296", "capacity is a whole number .*, got 4294967296"),
        ("capacity = 1e3", "capacity is a whole number .*, got 1e3"),
        ("capacity = 64, capacity = 128", "capacity is given twice"),
        ("on_full = 'spill', on_full = 'block'", "on_full is given twice"),
    ],
)
def test_stream_options_out_of_range_or_twice_are_refused(options, message):
    con = matchsql.connect(demo=False)
    with pytest.raises(ParseError, match=message):
        con.sql(f"CREATE STREAM s (k BIGINT, v DOUBLE) WITH ({options})")
    assert con.sql("SHOW STREAMS").fetchall() == []
    con.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"capacity": 0}, "capacity is a whole number of tuples from 1 to"),
        ({"capacity": 2**40}, "capacity is a whole number of tuples from 1 to"),
        ({"capacity": True}, "capacity is a whole number of tuples from 1 to"),
        ({"on_full": "drop"}, "on_full is 'block' or 'spill', got 'drop'"),
    ],
)
def test_the_python_api_checks_stream_options_too(options, message):
    with pytest.raises(StreamError, match=message):
        create_stream(duckdb.connect(), None, "s", COLUMNS, SCHEMA, **options)
    assert matchsql.connect(demo=False).sql("SHOW STREAMS").fetchall() == []


def test_a_ring_larger_than_the_shared_memory_left_is_refused(scratch_fs, monkeypatch):
    fs = scratch_fs()  # 2 MiB: no ring fits
    monkeypatch.setattr(shm_ring, "SHM_DIR", str(fs.path))
    con = matchsql.connect(demo=False)
    with pytest.raises(
        StreamError,
        match=r"a ring of 1,000 tuples of 2 columns needs \d+ MiB of "
        r"shared memory and .* has \d+ MiB free; give the stream a smaller",
    ):
        con.sql("CREATE STREAM s (k BIGINT, v DOUBLE) WITH (capacity = 1000)")
    assert con.sql("SHOW STREAMS").fetchall() == []
    con.close()


def test_an_archive_filter_nested_too_deeply_is_refused_and_a_deep_one_is_kept(tmp_path):
    con = matchsql.connect(demo=False)
    deep = "NOT " * 3000 + "k > 1"
    with pytest.raises(
        SemanticError,
        match=r"archive_filter: statement nested too deeply "
        r"\(limit 100\)",
    ):
        con.sql(
            f"CREATE STREAM f (k BIGINT) WITH (archive = '{tmp_path}/a/', "
            f"archive_filter = '{deep}')"
        )
    assert con.sql("SHOW STREAMS").fetchall() == []
    kept = "NOT " * 90 + "k > 1"  # within the limit: parsed, rendered back for DuckDB
    con.sql(
        f"CREATE STREAM f (k BIGINT) WITH (archive = '{tmp_path}/b/', archive_filter = '{kept}')"
    )
    shown = con.sql("SHOW STREAMS")
    row = dict(zip(shown.columns, shown.fetchall()[0]))
    assert row["archive_filter"].count("NOT") == 90
    con.close()
