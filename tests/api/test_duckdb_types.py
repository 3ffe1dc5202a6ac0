"""Results typed exactly as DuckDB's Python API types them.

A table with a column of every common DuckDB type is read through ``duckdb`` and
through ``matchsql`` with the same statements, plain and through a MATCH_RECOGNIZE
that passes the columns through (ALL ROWS PER MATCH): ``fetchall`` values (and their
Python types), ``types``, the DataFrame's dtypes and the Arrow table must be DuckDB's.
"""

from __future__ import annotations

import duckdb
import pytest

import matchsql

COLUMNS = [
    ("b", "BOOLEAN", "true"),
    ("ti", "TINYINT", "-8"),
    ("si", "SMALLINT", "-300"),
    ("i", "INTEGER", "70000"),
    ("bi", "BIGINT", "5000000000"),
    ("hi", "HUGEINT", "170141183460469231731687303715884105727"),
    ("uti", "UTINYINT", "200"),
    ("usi", "USMALLINT", "60000"),
    ("ui", "UINTEGER", "4000000000"),
    ("ubi", "UBIGINT", "18000000000000000000"),
    ("f", "FLOAT", "1.5"),
    ("d", "DOUBLE", "2.25"),
    ("dec", "DECIMAL(10,3)", "3.125"),
    ("dec2", "DECIMAL(30,5)", "12345678901234567890.5"),
    ("v", "VARCHAR", "'é日'"),
    ("bl", "BLOB", "'\\xAA\\x00'::BLOB"),
    ("dt", "DATE", "DATE '2024-01-02'"),
    ("tm", "TIME", "TIME '03:04:05.25'"),
    ("ts", "TIMESTAMP", "TIMESTAMP '2024-01-02 03:04:05.5'"),
    ("tstz", "TIMESTAMPTZ", "TIMESTAMPTZ '2024-01-02 03:04:05+00'"),
    ("tsns", "TIMESTAMP_NS", "TIMESTAMP_NS '2024-01-02 03:04:05.123456789'"),
    ("tss", "TIMESTAMP_S", "TIMESTAMP_S '2024-01-02 03:04:05'"),
    ("iv", "INTERVAL", "INTERVAL 3 DAY + INTERVAL 2 MONTH"),
    ("u", "UUID", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
    ("l", "INTEGER[]", "[1, 2, NULL]"),
    ("ar", "INTEGER[2]", "[1, 2]"),
    ("st", "STRUCT(a INTEGER, b VARCHAR)", "{'a': 1, 'b': 'x'}"),
    ("m", "MAP(VARCHAR, INTEGER)", "MAP {'k': 1}"),
    ("e", "mood", "'ok'"),
    ("j", "JSON", "'{\"a\": 1}'"),
]
SETUP = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    f"CREATE TABLE t (n INTEGER, {', '.join(f'{name} {kind}' for name, kind, _ in COLUMNS)})",
    f"INSERT INTO t VALUES (1, {', '.join(value for _, _, value in COLUMNS)}), "
    f"(2, {', '.join('NULL' for _ in COLUMNS)})",
]
NAMES = [name for name, _, _ in COLUMNS]
PLAIN = "SELECT * EXCLUDE (n) FROM t ORDER BY n"
PASSED_THROUGH = (
    "SELECT * EXCLUDE (n, k) FROM (SELECT *, 1 AS k FROM t) MATCH_RECOGNIZE ("
    "PARTITION BY k ORDER BY n ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) "
    "ORDER BY n"
)


@pytest.fixture(scope="module")
def connections():
    duck = duckdb.connect()
    ours = matchsql.connect(demo=False)
    for statement in SETUP:
        duck.execute(statement)
        ours.execute(statement)
    yield duck, ours
    ours.close()


def described(rows: list[tuple], column: int) -> list[tuple]:
    return [(row[column], type(row[column])) for row in rows]


@pytest.mark.parametrize("column", NAMES)
@pytest.mark.parametrize("statement", [PLAIN, PASSED_THROUGH], ids=["plain", "match_recognize"])
def test_values_types_and_dtypes_are_duckdbs(connections, statement: str, column: str) -> None:
    duck, ours = connections
    at = NAMES.index(column)
    expected = duck.sql(PLAIN)
    result = ours.execute(statement)
    assert result.columns == expected.columns
    assert str(result.types[at]) == str(expected.types[at])
    assert described(result.fetchall(), at) == described(expected.fetchall(), at)
    assert ours.execute(statement).df().dtypes.iloc[at] == duck.sql(PLAIN).df().dtypes.iloc[at]
    wanted = duck.sql(PLAIN).arrow()
    wanted = wanted.read_all() if hasattr(wanted, "read_all") else wanted  # a reader in 1.4+
    got = ours.execute(statement).arrow()
    assert got.schema.field(column) == wanted.schema.field(column)
    assert got.column(column).to_pylist() == wanted.column(column).to_pylist()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT sum(x) AS s FROM (VALUES (1), (2)) v(x)",
        "SELECT sum(x) AS s, avg(x) AS a, count(*) AS c FROM (VALUES (1.5), (2.5)) v(x)",
        "SELECT 1 AS a, 2 AS a",
    ],
)
def test_aggregates_are_typed_as_in_duckdb(statement: str) -> None:
    duck = duckdb.connect()
    ours = matchsql.connect(demo=False)
    expected = duck.sql(statement)
    result = ours.execute(statement)
    assert [str(t) for t in result.types] == [str(t) for t in expected.types]
    rows, wanted = result.fetchall(), expected.fetchall()
    assert rows == wanted and [type(v) for v in rows[0]] == [type(v) for v in wanted[0]]
    assert list(ours.execute(statement).df().dtypes) == list(duck.sql(statement).df().dtypes)
    assert list(ours.execute(statement).df().columns) == list(duck.sql(statement).df().columns)


SUM_OF_MEASURES = (
    "SELECT symbol, sum(v) AS total FROM trade MATCH_RECOGNIZE (PARTITION BY "
    "symbol ORDER BY ts MEASURES sum(volume) AS v ONE ROW PER MATCH "
    "PATTERN (A B+) DEFINE B AS price > PREV(price)) GROUP BY symbol "
    "ORDER BY symbol"
)


def test_a_sum_over_match_recognize_is_a_float64_column() -> None:
    """``sum(volume)`` of BIGINT volumes: DuckDB's df() gives float64, not objects."""
    ours = matchsql.connect()
    frame = ours.execute(SUM_OF_MEASURES).df()
    assert str(frame.dtypes["total"]) == "float64"
    assert frame["total"].tolist() == [
        float(total) for _, total in ours.execute(SUM_OF_MEASURES).fetchall()
    ]


def test_a_sum_over_match_recognize_is_a_hugeint() -> None:
    ours = matchsql.connect()
    result = ours.execute(SUM_OF_MEASURES)
    assert [str(t) for t in result.types] == ["VARCHAR", "HUGEINT"]
    assert all(type(total) is int for _, total in result.fetchall())


def test_the_box_shows_duckdbs_type_names() -> None:
    ours = matchsql.connect(demo=False)
    text = ours.execute("SELECT sum(x) AS s FROM (VALUES (1), (2)) v(x)").render()
    assert "hugeint" in text and "decimal" not in text


@pytest.mark.parametrize("keep_last", [True, False])
def test_the_shell_box_shows_duckdbs_type_names(keep_last: bool) -> None:
    import io

    from matchsql.cli.shell import Shell

    out, err = io.StringIO(), io.StringIO()
    shell = Shell(matchsql.connect(demo=False), out=out, err=err, keep_last=keep_last)
    shell.run_text("SELECT sum(x) AS s, '{}'::JSON AS j FROM (VALUES (1), (2)) v(x);")
    assert "hugeint" in out.getvalue() and "json" in out.getvalue(), err.getvalue()
    assert "decimal" not in out.getvalue()


DIRECT = (
    "SELECT * FROM (SELECT * EXCLUDE (n), n AS n FROM t) MATCH_RECOGNIZE ("
    "ORDER BY n ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true)"
)


@pytest.mark.parametrize("column", ["hi", "u", "e", "j", "ts", "st"])
def test_the_matches_alone_keep_duckdbs_types(connections, column: str) -> None:
    """The matches as the result (no DuckDB statement around them): the passed-through
    columns keep their DuckDB types too."""
    duck, ours = connections
    expected = duck.sql("SELECT * EXCLUDE (n), n AS n FROM t ORDER BY n")
    result = ours.execute(DIRECT)
    at = result.columns.index(column)
    assert str(result.types[at]) == str(expected.types[expected.columns.index(column)])
    assert described(result.fetchall(), at) == described(
        expected.fetchall(), expected.columns.index(column)
    )


@pytest.mark.parametrize("statement", [PLAIN, PASSED_THROUGH], ids=["plain", "match_recognize"])
def test_the_box_names_every_column_type_as_duckdb(connections, statement: str) -> None:
    duck, ours = connections
    from matchsql.results.render import render_batches

    result = ours.execute(statement)
    text = render_batches(
        result.schema, result.fetch_batches(), max_rows=10, max_width=2000, types=result.type_names
    )
    header = [cell.strip() for cell in text.splitlines()[2].strip("│").split("│")]
    assert header == [str(kind).lower() for kind in duck.sql(PLAIN).types]
