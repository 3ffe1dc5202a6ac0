"""DuckDB's conventions around MATCH_RECOGNIZE: replacement scans and registered objects,
views, EXPLAIN ANALYZE, prepared statements and parameters, settings."""

import logging

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import matchsql

# v over id 1..6 is 1 2 3 1 2 1: rising runs A B+ are ids 1-3 (3 rows) and 4-5 (2 rows),
# both starting at v = 1; id 6 starts no match (nothing rises after it).
ROWS = {"id": [1, 2, 3, 4, 5, 6], "v": [1, 2, 3, 1, 2, 1]}
RUNS = [(1, 3), (1, 2)]


def rising(source: str, define: str = "v > PREV(v)", measures: str = "count(*) AS n") -> str:
    return (
        f"SELECT * FROM {source} MATCH_RECOGNIZE (ORDER BY id "
        f"MEASURES FIRST(A.v) AS start, {measures} PATTERN (A B+) DEFINE B AS {define})"
    )


@pytest.fixture
def con():
    c = matchsql.connect(demo=False)
    c.sql(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, 1), (2, 2), (3, 3), (4, 1), (5, 2), "
        "(6, 1)) AS r(id, v)"
    )
    yield c
    c.close()


# -- replacement scans and registered objects ------------------------------------------


def test_match_recognize_over_a_pandas_frame_in_a_local_variable(con):
    frame = pd.DataFrame(ROWS)  # noqa: F841 - read by name in the SQL
    assert con.sql(rising("frame")).fetchall() == RUNS
    assert con.sql(f"SELECT sum(n) FROM ({rising('frame')})").fetchall() == [(5,)]


def test_match_recognize_over_an_arrow_table_and_a_reader(con):
    table = pa.table(ROWS)
    assert con.sql(rising("table")).fetchall() == RUNS
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())  # noqa: F841
    assert con.sql(f"SELECT count(*) FROM ({rising('reader')})").fetchall() == [(2,)]


def test_plain_sql_over_a_local_frame_and_a_join_with_one(con):
    frame = pd.DataFrame(ROWS)  # noqa: F841 - read by name in the SQL
    names = pd.DataFrame({"start": [1], "label": ["one"]})  # noqa: F841
    assert con.sql("SELECT count(*) FROM frame").fetchall() == [(6,)]
    rows = con.sql(
        f"SELECT m.n, names.label FROM ({rising('frame')}) m JOIN names USING (start) ORDER BY m.n"
    ).fetchall()
    assert rows == [(2, "one"), (3, "one")]
    assert "frame" not in con.tables() and "names" not in con.tables()  # nothing left behind


def test_a_table_of_the_database_wins_over_a_variable_of_the_same_name(con):
    t = pd.DataFrame({"id": [1, 2], "v": [5, 9]})  # noqa: F841 - hidden by table t
    assert con.sql(rising("t")).fetchall() == RUNS


def test_match_recognize_over_a_registered_frame_and_a_temporary_table(con):
    con.duckdb.register("registered", pd.DataFrame(ROWS))
    assert con.sql(rising("registered")).fetchall() == RUNS
    con.sql("CREATE TEMP TABLE temporary_t AS SELECT * FROM t")
    assert con.sql(rising("temporary_t")).fetchall() == RUNS
    assert con.sql("SELECT count(*) FROM registered").fetchall() == [(6,)]  # still registered


def test_a_temporary_table_wins_over_a_table_and_a_variable_of_its_name(con):
    # The temporary t holds ids 1-3 of the table t: one run, of 3 rows.
    con.sql("CREATE TEMP TABLE t AS SELECT * FROM memory.main.t WHERE id <= 3")
    t = pd.DataFrame(ROWS)  # noqa: F841 - hidden by both tables
    assert con.sql(rising("t")).fetchall() == [(1, 3)]
    assert con.sql(f"SELECT count(*) FROM ({rising('t')})").fetchall() == [(1,)]
    con.sql("DROP TABLE temp.main.t")
    assert con.sql(rising("t")).fetchall() == RUNS  # the database's again


def test_a_variable_named_as_no_table_is_read_and_a_table_named_as_none_fails(con):
    events = pa.table({"id": [1, 2, 3], "v": [5, 6, 7]})  # noqa: F841 - read by name
    assert con.sql(rising("events")).fetchall() == [(5, 3)]
    assert con.sql(rising("EVENTS")).fetchall() == [(5, 3)]  # names are case-blind
    with pytest.raises(matchsql.CatalogError, match="other_events"):
        con.sql(rising("other_events"))


def test_a_missing_table_is_still_a_catalog_error(con):
    with pytest.raises(matchsql.CatalogError, match="no_such"):
        con.sql(rising("no_such"))
    not_a_frame = 42  # noqa: F841 - not something DuckDB scans
    with pytest.raises(matchsql.CatalogError, match="not_a_frame"):
        con.sql("SELECT * FROM not_a_frame")


# -- views ----------------------------------------------------------------------------------


def test_a_view_over_match_recognize(con):
    assert con.sql(f"CREATE VIEW runs AS {rising('t')}") is None
    assert con.sql("SELECT count(*) FROM runs").fetchall() == [(2,)]
    assert con.sql("SELECT n FROM runs r WHERE r.n > 2").fetchall() == [(3,)]
    assert [row[:2] for row in con.sql("DESCRIBE runs").fetchall()] == [
        ("start", "INTEGER"),
        ("n", "BIGINT"),
    ]
    assert "runs" in con.tables()


def test_the_view_reads_the_table_as_it_is_when_queried(con):
    con.sql(f"CREATE VIEW runs AS {rising('t')}")
    con.sql("INSERT INTO t VALUES (7, 5)")  # id 6-7 (1 then 5) is a third run of 2 rows
    assert con.sql("SELECT n FROM runs").fetchall() == [(3,), (2,), (2,)]


def test_views_over_views_and_a_column_list(con):
    con.sql(f"CREATE VIEW runs(first_v, length) AS {rising('t')}")
    con.sql("CREATE VIEW long_runs AS SELECT length FROM runs WHERE length > 2")
    assert con.sql("SELECT * FROM long_runs").fetchall() == [(3,)]
    con.sql("CREATE VIEW counted AS SELECT count(*) AS c FROM long_runs, runs")
    assert con.sql("SELECT c FROM counted").fetchall() == [(2,)]


def test_drop_and_replace_a_view(con):
    con.sql(f"CREATE VIEW runs AS {rising('t')}")
    with pytest.raises(matchsql.CatalogError):
        con.sql(f"CREATE VIEW runs AS {rising('t')}")
    con.sql(f"CREATE VIEW IF NOT EXISTS runs AS {rising('t')}")
    con.sql("CREATE OR REPLACE VIEW runs AS SELECT 1 AS n")
    assert con.sql("SELECT n FROM runs").fetchall() == [(1,)]
    con.sql(f"CREATE OR REPLACE VIEW runs AS {rising('t', measures='max(v) AS top')}")
    assert con.sql("SELECT top FROM runs").fetchall() == [(3,), (2,)]
    con.sql("DROP VIEW runs")
    with pytest.raises(matchsql.CatalogError):
        con.sql("SELECT * FROM runs")


def test_an_invalid_view_is_not_created(con):
    with pytest.raises(matchsql.CatalogError, match="nope"):
        con.sql(f"CREATE VIEW bad AS {rising('t', define='nope > 1')}")
    assert "bad" not in con.tables()


def test_views_survive_reopening_and_are_seen_by_other_connections(tmp_path):
    path = str(tmp_path / "views.duckdb")
    with matchsql.connect(path) as first:
        first.sql(
            "CREATE TABLE t AS SELECT * FROM (VALUES (1, 1), (2, 2), (3, 3), (4, 1), "
            "(5, 2), (6, 1)) AS r(id, v)"
        )
        first.sql(f"CREATE VIEW runs AS {rising('t')}")
        with matchsql.connect(path) as second:
            assert second.sql("SELECT sum(n) FROM runs").fetchall() == [(5,)]
    with matchsql.connect(path) as reopened:
        assert reopened.sql("SELECT * FROM runs").fetchall() == RUNS
    plain = duckdb.connect(path)
    try:
        with pytest.raises(duckdb.Error, match="query it through matchsql"):
            plain.execute("SELECT * FROM runs").fetchall()
    finally:
        plain.close()


def test_a_view_made_or_replaced_by_another_connection_is_seen(tmp_path):
    path = str(tmp_path / "shared.duckdb")
    with matchsql.connect(path) as first, matchsql.connect(path) as second:
        first.sql(
            "CREATE TABLE t AS SELECT * FROM (VALUES (1, 1), (2, 2), (3, 3), (4, 1), "
            "(5, 2), (6, 1)) AS r(id, v)"
        )
        assert second.sql("SELECT count(*) FROM t").fetchall() == [(6,)]  # catalog read
        first.sql(f"CREATE VIEW runs AS {rising('t')}")
        assert second.sql("SELECT sum(n) FROM runs").fetchall() == [(5,)]
        first.sql("CREATE OR REPLACE VIEW runs AS SELECT 7 AS n")
        assert second.sql("SELECT sum(n) FROM runs").fetchall() == [(7,)]


# -- EXPLAIN ANALYZE ------------------------------------------------------------------------


def test_explain_analyze_runs_the_statement_and_reports_the_matcher(con):
    lines = [
        row[0] for row in con.sql(f"EXPLAIN ANALYZE SELECT sum(n) FROM ({rising('t')})").fetchall()
    ]
    assert lines[0] == "-- MATCH_RECOGNIZE #1 of 1"
    assert any(line.startswith("path: ") for line in lines)  # the plan, as EXPLAIN gives it
    assert "analyze: rows in 6 (1 batches)" in lines
    assert "analyze: matches 2" in lines
    assert "analyze: rows 1" in lines
    timed = [line for line in lines if line.endswith(" ms")]
    assert [line.split(" ")[1] for line in timed] == ["input", "matching", "total"]
    assert all(float(line.split()[-2]) >= 0 for line in timed)


def test_explain_analyze_of_all_rows_per_match_counts_rows(con):
    query = rising("t").replace("PATTERN", "ALL ROWS PER MATCH PATTERN")
    lines = [row[0] for row in con.sql(f"EXPLAIN ANALYZE {query}").fetchall()]
    assert "analyze: rows out 5" in lines and "analyze: rows 5" in lines


# -- prepared statements and parameters -----------------------------------------------------


def test_parameters_in_define_measures_input_and_outer_query(con):
    assert con.sql(rising("t", define="v > PREV(v) + ?"), [0.5]).fetchall() == RUNS
    assert con.sql(rising("t", define="v > PREV(v) + ?"), [1]).fetchall() == []
    assert con.sql(rising("t", measures="count(*) + $1 AS n"), [10]).fetchall() == [
        (1, 13),
        (1, 12),
    ]
    assert con.sql(rising("(SELECT * FROM t WHERE id <= ?)"), [3]).fetchall() == [(1, 3)]
    assert con.execute(
        f"SELECT n FROM ({rising('t')}) WHERE n > $limit", {"limit": 2}
    ).fetchall() == [(3,)]
    assert con.execute("SELECT ? + 1", [41]).fetchall() == [(42,)]  # plain SQL: DuckDB's


def test_parameter_values_are_literals_not_sql(con):
    query = rising("t", define="v > PREV(v)", measures="count(*) AS n, ? AS tag")
    assert con.sql(query, ["it's; DROP TABLE t"]).fetchall() == [
        (1, 3, "it's; DROP TABLE t"),
        (1, 2, "it's; DROP TABLE t"),
    ]
    assert con.sql("SELECT count(*) FROM t").fetchall() == [(6,)]


def test_a_missing_parameter_value_is_an_error(con):
    with pytest.raises(matchsql.SemanticError, match="parameter"):
        con.sql(rising("t", define="v > PREV(v) + ?"), [])


def test_prepare_and_execute(con, caplog):
    with caplog.at_level(logging.WARNING, logger="sqlglot"):
        con.sql(f"PREPARE runs AS {rising('t', define='v > PREV(v) + ?')}")
        assert con.sql("EXECUTE runs(0)").fetchall() == RUNS
        assert con.sql("EXECUTE runs(1)").fetchall() == []
        con.sql("PREPARE plain AS SELECT ? * 2")
        assert con.sql("EXECUTE plain(21)").fetchall() == [(42,)]
        con.sql("DEALLOCATE runs")
        con.sql(f"EXPLAIN ANALYZE {rising('t')}")
    assert not [r for r in caplog.records if "Command" in r.getMessage()]
    with pytest.raises(matchsql.Error):
        con.sql("EXECUTE runs(0)")


# -- settings -------------------------------------------------------------------------------


def test_show_reset_and_current_setting_of_a_matchsql_setting(con):
    assert con.sql("SHOW input_mode").fetchall() == [("pull",)]
    con.sql("SET input_mode = 'push'")
    assert con.sql("SHOW input_mode").fetchall() == [("push",)]
    assert con.sql("SELECT current_setting('input_mode') AS m").fetchall() == [("push",)]
    assert con.sql("SELECT current_setting('batch_size') > 0").fetchall() == [(True,)]
    con.sql("RESET input_mode")
    assert con.sql("SHOW input_mode").fetchall() == [("pull",)]
    assert con.sql("SELECT current_setting('threads') > 0").fetchall() == [(True,)]  # DuckDB's
