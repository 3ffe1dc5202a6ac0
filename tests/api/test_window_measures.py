"""Row pattern measures over a window: EXPLAIN, error positions, the rewrite around them,
and agreement with MATCH_RECOGNIZE where both must find the same matches.

The hand-derived semantics cases are in tests/conformance/cases_window.py.
"""

from __future__ import annotations

import random
import zlib

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.grammar.statements import parse
from matchsql.grammar.window_pattern import PatternWindow
from matchsql.session import window_measures

LETTERS = "CREATE TABLE s AS SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'b')) t(id, v)"
QUERY = """SELECT id, f OVER w AS f FROM s
WINDOW w AS (ORDER BY id MEASURES FIRST(id) AS f
  ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
  PATTERN (A B) DEFINE A AS v = 'a', B AS v = 'b')
ORDER BY id"""


@pytest.fixture
def con():
    con = matchsql.connect(demo=False)
    con.sql(LETTERS)
    return con


def error_of(con, sql: str, params=None) -> matchsql.Error:
    with pytest.raises(matchsql.Error) as info:
        result = con.sql(sql, params)
        if result is not None:
            result.fetchall()
    return info.value


@pytest.mark.parametrize("path", ["auto", "reference", "registers", "row_local"])
def test_explain_names_the_window_and_its_path(path):
    con = matchsql.connect(demo=False, execution_path=path)
    con.sql(LETTERS)
    # PREV (which never changes the result here) makes each row's match a run of its own.
    query = QUERY.replace("B AS v = 'b'", "B AS v = 'b' AND PREV(v) = 'a'")
    lines = [row[0] for row in con.sql("EXPLAIN " + query).fetchall()]
    assert lines[0].startswith("-- WINDOW w #1 of 1: window pattern measure")
    assert "per row: one matcher run over the row's frame" in lines
    assert "called: f" in lines
    assert any(
        line.startswith("frame: ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING; INITIAL")
        for line in lines
    )
    paths = [line for line in lines if line.startswith("path: ")]
    expected = "reference" if path in ("reference", "auto") else path
    assert paths == [f"path: {expected}"]
    if path == "auto":  # INITIAL: one short run per row, on the reference matcher
        assert any(line.startswith("why: INITIAL: each row's run") for line in lines)
    # INITIAL runs the pattern anchored at the row.
    assert "MATCH_RECOGNIZE PATTERN (^ A B)" in lines


def test_explain_of_seek_keeps_the_pattern_unanchored(con):
    sql = QUERY.replace("PATTERN", "SEEK PATTERN")
    lines = [row[0] for row in con.sql("EXPLAIN " + sql).fetchall()]
    assert "MATCH_RECOGNIZE PATTERN (A B)" in lines
    assert any("; SEEK;" in line for line in lines)
    assert any(
        line.startswith("per partition: one run with AFTER MATCH SKIP TO NEXT ROW")
        for line in lines
    )
    assert "path: row_local" in lines  # SEEK scans the frame: the planner's choice


@pytest.mark.parametrize(
    ("change", "at"),
    [
        (("ROWS BETWEEN", "ALL ROWS PER MATCH ROWS BETWEEN"), "ALL ROWS"),
        (("SELECT id, f OVER w AS f", "SELECT id, f"), "f FROM"),
        (("PATTERN (A B)", "PATTERN (A B $)"), "$)"),
        (("FIRST(id) AS f", "MATCH_NUMBER() AS f"), "MATCH_NUMBER"),
        (("ROWS BETWEEN CURRENT ROW", "RANGE BETWEEN CURRENT ROW"), "RANGE"),
        (("f OVER w AS f", "g OVER w AS f"), "g OVER"),
        (("UNBOUNDED FOLLOWING", "'x' FOLLOWING"), "'x'"),
    ],
)
def test_errors_point_at_the_offending_text(con, change, at):
    sql = QUERY.replace(*change)
    err = error_of(con, sql)
    assert isinstance(err, matchsql.SemanticError)
    offset = sql.index(at)
    line = sql[:offset].count("\n") + 1
    column = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    assert (err.line, err.column) == (line, column), str(err)
    assert "Traceback" not in err.message


def test_join_in_from_is_refused(con):
    err = error_of(con, QUERY.replace("FROM s", "FROM s JOIN s AS s2 USING (id)"))
    assert "single table" in err.message


def test_group_by_is_refused(con):
    err = error_of(con, QUERY.replace("\nORDER BY id", "\nGROUP BY id, f ORDER BY id"))
    assert "GROUP BY" in err.message


def test_window_clause_round_trips():
    tree = parse(QUERY.replace("PATTERN", "AFTER MATCH SKIP TO NEXT ROW SEEK PATTERN"))[0]
    window = tree.args["windows"][0]
    assert isinstance(window, PatternWindow)
    text = tree.sql(dialect="matchsql")
    assert "AFTER MATCH SKIP TO NEXT ROW SEEK PATTERN (A B)" in text
    assert parse(text)[0].sql(dialect="matchsql") == text


def test_parameters_bind_in_the_window(con):
    sql = QUERY.replace("UNBOUNDED FOLLOWING", "? FOLLOWING").replace("v = 'a'", "v = ?")
    assert con.sql(sql, [1, "a"]).fetchall() == [(1, 1), (2, None), (3, 3), (4, None)]
    # A frame of the row alone: A B never fits.
    assert con.sql(sql, [0, "a"]).fetchall() == [(1, None), (2, None), (3, None), (4, None)]


def test_window_in_a_subquery_filtered_outside(con):
    inner = QUERY.rsplit("\nORDER BY id", 1)[0]
    sql = f"SELECT id, f FROM ({inner}) AS q WHERE f IS NOT NULL ORDER BY id"
    assert con.sql(sql).fetchall() == [(1, 1), (3, 3)]


def test_window_over_a_match_recognize(con):
    source = (
        "(SELECT * FROM s MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c "
        "ALL ROWS PER MATCH PATTERN (X+) DEFINE X AS true)) AS m"
    )
    sql = QUERY.replace("FROM s", f"FROM {source}").replace("SELECT id,", "SELECT id, c,")
    assert con.sql(sql).fetchall() == [(1, "X", 1), (2, "X", None), (3, "X", 3), (4, "X", None)]


def test_other_statements_naming_window_and_pattern_stay_duckdb(con):
    sql = (
        "SELECT id, row_number() OVER w AS rn, 'pattern (' AS t FROM s "
        "WINDOW w AS (ORDER BY id DESC) ORDER BY id"
    )
    assert con.sql(sql).fetchall() == [
        (1, 4, "pattern ("),
        (2, 3, "pattern ("),
        (3, 2, "pattern ("),
        (4, 1, "pattern ("),
    ]


def registered_sources(con) -> list[int]:
    """Numbers of the window sources still registered on ``con``'s DuckDB connection."""
    top = next(window_measures._numbers)
    raw = con._executor.con
    found = []
    for number in range(top):
        try:
            raw.sql(f"SELECT 1 FROM __matchsql_window_source_{number} LIMIT 0").fetchall()
        except duckdb.CatalogException:
            continue
        found.append(number)
    return found


def test_registered_tables_go_with_the_result(con):
    result = con.sql(QUERY)
    result.fetchall()
    result.close()
    assert registered_sources(con) == []
    # The check sees a source that is still registered.
    number = next(window_measures._numbers)
    con._executor.con.register(f"__matchsql_window_source_{number}", pa.table({"x": [1]}))
    assert registered_sources(con) == [number]


PATTERNS = ["A B+ C", "A+ B", "(A | B) C*", "A B? C", "A{2,3} B", "(A B)+"]


@pytest.mark.parametrize("path", ["reference", "auto"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_initial_skip_to_next_row_agrees_with_match_recognize(pattern, path):
    """With INITIAL, SKIP TO NEXT ROW, an unbounded frame and DEFINEs that read only the
    current row, each row's window match is MATCH_RECOGNIZE's match that starts at that
    row under SKIP TO NEXT ROW (both try every row once, over the rest of the partition)."""
    rng = random.Random(zlib.crc32(pattern.encode()))
    con = matchsql.connect(demo=False, execution_path=path)
    rows = ", ".join(f"({i % 3}, {i}, '{rng.choice('abc')}')" for i in range(120))
    con.sql(f"CREATE TABLE r AS SELECT * FROM (VALUES {rows}) t(p, id, v)")
    defines = ", ".join(f"{x} AS v = '{x.lower()}'" for x in "ABC" if x in pattern)
    window = con.sql(
        f"SELECT p, id, l OVER w, n OVER w FROM r WINDOW w AS (PARTITION BY p ORDER BY id "
        f"MEASURES LAST(id) AS l, count(*) AS n ROWS BETWEEN CURRENT ROW AND UNBOUNDED "
        f"FOLLOWING AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {defines}) "
        f"ORDER BY p, id"
    ).fetchall()
    matches = {
        (p, f): (lid, n)
        for p, f, lid, n in con.sql(
            f"SELECT p, f, l, n FROM r MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
            f"MEASURES FIRST(id) AS f, LAST(id) AS l, count(*) AS n ONE ROW PER MATCH "
            f"AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {defines})"
        ).fetchall()
    }
    assert matches
    for p, row, lid, n in window:
        assert (lid, n) == matches.get((p, row), (None, None)), (p, row)


#: Measures that apply DuckDB's SQL to the match's results, or read no row at all.
MATCH_SQL = [
    "concat_ws('-', FIRST(v), lower(CLASSIFIER()))",
    "max(id) - FIRST(id)",
    "median(id)",
    "string_agg(v, '' ORDER BY id DESC)",
    "typeof(1)",
    "CAST('0b5f2d54-3b71-4fb9-9a0b-2f1f1a1d7a3e' AS UUID)",
]


@pytest.mark.parametrize("path", ["reference", "auto"])
@pytest.mark.parametrize("pattern", ["A B+ C", "(A B)+"])
def test_measures_over_the_match_agree_with_match_recognize(pattern, path):
    """A window measure that DuckDB computes over the match's results is MATCH_RECOGNIZE's
    value for the match that starts at the row (NULL where none does), in its type."""
    rng = random.Random(zlib.crc32(pattern.encode()))
    con = matchsql.connect(demo=False, execution_path=path)
    rows = ", ".join(f"({i % 3}, {i}, '{rng.choice('abc')}')" for i in range(90))
    con.sql(f"CREATE TABLE r AS SELECT * FROM (VALUES {rows}) t(p, id, v)")
    defines = ", ".join(f"{x} AS v = '{x.lower()}'" for x in "ABC" if x in pattern)
    measures = ", ".join(f"{m} AS m{k}" for k, m in enumerate(MATCH_SQL))
    calls = ", ".join(f"m{k} OVER w AS m{k}" for k in range(len(MATCH_SQL)))
    window = con.sql(
        f"SELECT p, id, {calls} FROM r WINDOW w AS (PARTITION BY p ORDER BY id "
        f"MEASURES {measures} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING "
        f"AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {defines}) ORDER BY p, id"
    )
    expected = con.sql(
        f"SELECT p, f, {', '.join(f'm{k}' for k in range(len(MATCH_SQL)))} FROM r "
        f"MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES FIRST(id) AS f, {measures} "
        f"ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) "
        f"DEFINE {defines})"
    )
    assert window.types[2:] == expected.types[2:]
    matches = {(row[0], row[1]): row[2:] for row in expected.fetchall()}
    assert matches
    nulls = (None,) * len(MATCH_SQL)
    for row in window.fetchall():
        assert row[2:] == matches.get((row[0], row[1]), nulls), row[:2]


def test_pattern_window_in_over_clause_is_refused_clearly(con):
    sql = QUERY.replace(
        "f OVER w AS f",
        "f OVER (ORDER BY id MEASURES FIRST(id) AS f "
        "ROWS BETWEEN CURRENT ROW AND CURRENT ROW PATTERN (A) DEFINE A AS true) AS f",
    )
    err = error_of(con, sql)
    assert "WINDOW clause" in err.message
    assert err.column == sql.index("OVER (") + 1


def test_view_over_a_pattern_window(con):
    con.sql("CREATE VIEW pv AS " + QUERY.rsplit("\nORDER BY id", 1)[0])
    assert con.sql("SELECT * FROM pv ORDER BY id").fetchall() == [
        (1, 1),
        (2, None),
        (3, 3),
        (4, None),
    ]
    assert [row[0] for row in con.sql("DESCRIBE pv").fetchall()] == ["id", "f"]


def test_cte_union_and_create_table_as(con):
    inner = QUERY.rsplit("\nORDER BY id", 1)[0]
    assert con.sql(
        f"WITH q AS ({inner}) SELECT id FROM q WHERE f IS NULL ORDER BY id"
    ).fetchall() == [(2,), (4,)]
    assert con.sql(f"{inner} UNION ALL SELECT 9, 9 ORDER BY id").fetchall() == [
        (1, 1),
        (2, None),
        (3, 3),
        (4, None),
        (9, 9),
    ]
    con.sql(f"CREATE TABLE kept AS {inner}")
    assert con.sql("SELECT * FROM kept ORDER BY id").fetchall() == [
        (1, 1),
        (2, None),
        (3, 3),
        (4, None),
    ]


def test_aggregate_over_w_reads_source_qualified_columns(con):
    sql = QUERY.replace("f OVER w AS f", "max(s.id) OVER w AS f")
    assert con.sql(sql).fetchall() == [(1, 2), (2, None), (3, 4), (4, None)]


def test_measure_in_where_is_refused(con):
    sql = QUERY.replace("FROM s\n", "FROM s WHERE f OVER w > 0\n")
    err = error_of(con, sql)
    assert "only in the SELECT list" in err.message


def test_no_input_rows(con):
    sql = QUERY.replace("FROM s\n", "FROM s WHERE id > 10\n")
    assert con.sql(sql).fetchall() == []


def test_explain_analyze_runs_the_statement(con):
    lines = [row[0] for row in con.sql("EXPLAIN ANALYZE " + QUERY).fetchall()]
    assert lines[0].startswith("-- WINDOW w #1 of 1: window pattern measure")
    assert "analyze: rows 4" in lines
    assert registered_sources(con) == []


def test_prepared_statement_with_a_pattern_window(con):
    sql = QUERY.replace("UNBOUNDED FOLLOWING", "? FOLLOWING")
    con.sql(f"PREPARE pw AS {sql}")
    assert con.sql("EXECUTE pw(0)").fetchall() == [(1, None), (2, None), (3, None), (4, None)]
    assert con.sql("EXECUTE pw(1)").fetchall() == [(1, 1), (2, None), (3, 3), (4, None)]


SCAN_PATTERNS = [
    "A B+ C",
    "A+ B",
    "(A | B) C*",
    "A B? C",
    "A{2,3} B",
    "(A B)+",
    "PERMUTE(A, B) C?",
    "A B*? C",
]
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO LAST A"]


@pytest.mark.parametrize("mode", ["INITIAL", "SEEK"])
@pytest.mark.parametrize("skip", SKIPS)
@pytest.mark.parametrize("pattern", SCAN_PATTERNS)
def test_partition_scan_agrees_with_per_row_runs(pattern, skip, mode):
    """A window whose rows' matches are read from one run per partition (no PREV, no empty
    match, frames to the partition end) gives what one run per row frame gives; the second
    query forces per-row runs with a PREV that is always true (NULL or not)."""
    rng = random.Random(f"{pattern}/{skip}/{mode}")
    con = matchsql.connect(demo=False)
    letters = ["aabbc"[i // 2 % 5] if rng.random() < 0.7 else rng.choice("abc") for i in range(90)]
    rows = ", ".join(f"({i % 2}, {i}, '{v}')" for i, v in enumerate(letters))
    con.sql(f"CREATE TABLE r AS SELECT * FROM (VALUES {rows}) t(p, id, v)")
    defines = [f"{x} AS v = '{x.lower()}'" for x in "ABC" if x in pattern]
    noop = " AND (PREV(id) IS NULL OR PREV(id) IS NOT NULL)"
    template = (
        "SELECT p, id, f OVER w, l OVER w, c OVER w, n OVER w FROM r WINDOW w AS ("
        "PARTITION BY p ORDER BY id MEASURES FIRST(id) AS f, LAST(id) AS l, "
        "CLASSIFIER() AS c, count(A.id) AS n ROWS BETWEEN CURRENT ROW AND UNBOUNDED "
        f"FOLLOWING AFTER MATCH SKIP {skip} {mode} PATTERN ({pattern}) DEFINE @) "
        "ORDER BY p, id"
    )
    scanned = template.replace("@", ", ".join(defines))
    per_row = template.replace("@", ", ".join([defines[0] + noop, *defines[1:]]))
    assert any(
        "per partition: one run" in line[0] for line in con.sql("EXPLAIN " + scanned).fetchall()
    )
    assert any(
        "per row: one matcher run" in line[0] for line in con.sql("EXPLAIN " + per_row).fetchall()
    )
    try:
        want = con.sql(per_row).fetchall()
    except matchsql.ExecutionError as exc:  # SKIP TO LAST A onto a match's first row
        with pytest.raises(matchsql.ExecutionError, match="AFTER MATCH SKIP"):
            con.sql(scanned).fetchall()
        assert "AFTER MATCH SKIP" in exc.message
        return
    assert any(row[2] is not None for row in want)
    assert con.sql(scanned).fetchall() == want


def test_qualify_named_windows_distinct_and_limit(con):
    window = QUERY.split("WINDOW ", 1)[1].rsplit("\nORDER BY id", 1)[0]
    assert con.sql(
        f"SELECT id FROM s WINDOW {window} QUALIFY f OVER w IS NOT NULL ORDER BY id"
    ).fetchall() == [(1,), (3,)]
    assert con.sql(
        f"SELECT id, sum(id) OVER w2 AS run FROM s WINDOW {window}, "
        "w2 AS (ORDER BY id) QUALIFY f OVER w IS NULL ORDER BY id"
    ).fetchall() == [(2, 3), (4, 10)]
    assert con.sql(
        f"SELECT DISTINCT f OVER w AS f FROM s WINDOW {window} ORDER BY f"
    ).fetchall() == [(1,), (3,), (None,)]
    assert con.sql(
        f"SELECT id, f OVER w AS f FROM s WINDOW {window} ORDER BY id DESC LIMIT 1"
    ).fetchall() == [(4, None)]


def test_columns_named_pattern_or_measures_keep_ordinary_windows(con):
    con.sql("CREATE TABLE c AS SELECT * FROM (VALUES (1, 2, 3)) t(pattern, measures, x)")
    sql = (
        "SELECT sum(x) OVER w AS s, 'pattern (' AS t FROM c WINDOW w AS (PARTITION BY "
        "measures ORDER BY pattern, measures)"
    )
    assert con.sql(sql).fetchall() == [(3, "pattern (")]
    tree = parse(sql)[0]
    assert not [w for w in tree.args["windows"] if isinstance(w, PatternWindow)]


def test_match_recognize_beside_a_pattern_window(con):
    inner = QUERY.rsplit("\nORDER BY id", 1)[0]
    other = (
        "SELECT n AS id, n AS f FROM s MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) "
        "AS n ONE ROW PER MATCH PATTERN (A+) DEFINE A AS true)"
    )
    result = con.sql(f"{inner} UNION ALL {other} ORDER BY id, f")
    assert result.fetchall() == [(1, 1), (2, None), (3, 3), (4, 4), (4, None)]
    result.close()
    assert registered_sources(con) == []
