"""The DuckDB-style Python API: connect, sql/execute, Result fetchers, settings, errors."""

import pyarrow as pa
import pytest

import matchsql


@pytest.fixture
def con():
    c = matchsql.connect(demo=False)
    yield c
    c.close()


def test_plain_sql_passes_through(con):
    con.sql("CREATE TABLE t(a INTEGER, b VARCHAR)")
    con.sql("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, NULL)")
    res = con.sql("SELECT a, b FROM t ORDER BY a")
    assert res.columns == ["a", "b"]
    assert res.fetchall() == [(1, "x"), (2, "y"), (3, None)]


def test_statements_without_rows_return_none(con):
    assert con.sql("CREATE TABLE t(a INTEGER)") is None
    assert con.execute("INSERT INTO t VALUES (1)") is not False


def test_several_statements_return_the_last_result(con):
    res = con.sql(
        "CREATE TABLE t AS SELECT 1 AS a; INSERT INTO t VALUES (2); SELECT sum(a) AS s FROM t"
    )
    assert res.fetchall() == [(3,)]


def test_fetchone_fetchmany_and_iteration(con):
    res = con.sql("SELECT range AS i FROM range(5)")
    assert res.fetchone() == (0,)
    assert res.fetchmany(2) == [(1,), (2,)]
    assert list(res) == [(3,), (4,)]
    assert res.fetchone() is None


def test_arrow_and_df(con):
    table = con.sql("SELECT range AS i, range * 2 AS j FROM range(3)").arrow()
    assert isinstance(table, pa.Table)
    assert table.column("j").to_pylist() == [0, 2, 4]
    frame = con.sql("SELECT 1 AS one").df()
    assert list(frame.columns) == ["one"] and frame["one"].tolist() == [1]


def test_show_prints_a_box_table(con, capsys):
    con.sql("SELECT 42 AS answer").show()
    out = capsys.readouterr().out
    assert "answer" in out and "42" in out


def test_duckdb_connection_is_reachable(con):
    con.duckdb.execute("CREATE TABLE direct AS SELECT 7 AS x")
    assert con.sql("SELECT x FROM direct").fetchall() == [(7,)]


def test_demo_table_in_default_connection():
    with matchsql.connect() as c:
        assert "trade" in c.tables()
        cols = c.sql("SELECT * FROM trade LIMIT 0").columns
        assert cols == ["symbol", "price", "volume", "ts"]


def test_file_database_has_no_demo_unless_asked(tmp_path):
    path = str(tmp_path / "x.duckdb")
    with matchsql.connect(path) as c:
        assert "trade" not in c.tables()
    with matchsql.connect(path, demo=True) as c:
        assert "trade" in c.tables()


def test_settings_by_connect_and_by_set(con):
    c = matchsql.connect(demo=False, max_threads=10)
    assert c.config.max_threads == 10
    con.sql("SET max_threads = 123")
    assert con.config.max_threads == 123
    con.sql("SET batch_size TO '4096'")
    assert con.config.batch_size == 4096


def test_bad_settings_are_errors(con):
    with pytest.raises(matchsql.Error, match="unknown setting"):
        matchsql.connect(demo=False, no_such_option=1)
    with pytest.raises(matchsql.Error, match="must be a whole number from 1 to 10,000,000"):
        con.sql("SET max_threads = -5")


def test_duckdb_settings_still_work(con):
    con.sql("SET threads = 1")
    assert con.sql("SELECT current_setting('threads')").fetchall() == [(1,)]


def test_errors_are_matchsql_errors(con):
    with pytest.raises(matchsql.ParseError):
        con.sql("SELEC 1")
    with pytest.raises(matchsql.CatalogError):
        con.sql("SELECT * FROM no_such_table")
    with pytest.raises(matchsql.Error, match="no_such_column"):
        con.sql("SELECT no_such_column FROM range(1)")


def test_error_position_points_into_the_second_statement(con):
    text = "SELECT 1;\nSELECT * FROM t MATCH_RECOGNIZE (PATTERN (A+ B) DEFINE C AS true)"
    con.sql("CREATE TABLE t(x INTEGER)")
    with pytest.raises(matchsql.Error) as info:
        con.sql(text)
    assert info.value.line == 2


def test_one_row_per_match_needs_an_output_column(con):
    con.sql("CREATE TABLE t AS SELECT range AS x FROM range(3)")
    with pytest.raises(matchsql.SemanticError, match="no columns") as info:
        con.sql("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x PATTERN (A+) DEFINE A AS x > 0)")
    assert (info.value.line, info.value.column) == (1, 15)


def test_row_fetchers_read_across_batches():
    c = matchsql.connect(demo=False, batch_size=2)
    res = c.sql("SELECT range AS i FROM range(7)")
    assert res.fetchone() == (0,)
    assert res.fetchmany(3) == [(1,), (2,), (3,)]
    assert list(res) == [(4,), (5,), (6,)]
    assert [b.num_rows for b in c.sql("SELECT * FROM range(5)").fetch_batches()] == [2, 2, 1]
    assert c.sql("SELECT * FROM range(5)").fetchall() == [(i,) for i in range(5)]
