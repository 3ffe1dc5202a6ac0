"""Path selection, forcing a path, and EXPLAIN output."""

from __future__ import annotations

import pytest

import matchsql
from bench.queries import DEJAVU
from matchsql.engine.planner import choose_path
from tests.property.strategies import spec_of

ROW_LOCAL = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS x > PREV(x))"""
REGISTERS = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE B AS x < A.x, C AS x > PREV(x))"""
REFERENCE = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS COUNT(DISTINCT B.x) < 3)"""
# Running aggregates are accumulators the register threads carry.
AGGREGATES = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+ C) DEFINE B AS SUM(B.x) < 10 AND COUNT(A.*) = 1,
  C AS AVG(x) > MIN(B.y) OR MAX(y) FILTER (WHERE x > 0) IS NULL)"""


def test_choose_path() -> None:
    assert choose_path(spec_of(ROW_LOCAL)).name == "row_local"
    assert choose_path(spec_of(REGISTERS)).name == "registers"
    choice = choose_path(spec_of(REFERENCE))
    assert choice.name == "reference" and "COUNT(DISTINCT B.x)" in choice.reason
    choice = choose_path(spec_of(AGGREGATES))
    assert choice.name == "registers" and "running aggregates" in choice.reason
    assert choose_path(spec_of(ROW_LOCAL), "reference").name == "reference"
    assert choose_path(spec_of(ROW_LOCAL), "registers").name == "registers"


def test_forcing_a_path_that_does_not_apply_is_an_error() -> None:
    with pytest.raises(matchsql.Error, match="does not apply"):
        choose_path(spec_of(REGISTERS), "row_local")
    with pytest.raises(matchsql.Error, match=r"does not apply.*COUNT\(DISTINCT"):
        choose_path(spec_of(REFERENCE), "registers")
    con = matchsql.connect(demo=False)
    with pytest.raises(matchsql.Error, match="setting .execution_path. must be one of"):
        con.sql("SET execution_path = 'fast'")


@pytest.mark.parametrize("name", sorted(DEJAVU))
def test_dejavu_queries_take_the_register_path(name: str) -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE trade (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    lines = [r[0] for r in con.sql("EXPLAIN " + DEJAVU[name].rstrip(";")).fetchall()]
    assert "path: registers" in lines
    assert any(line.strip().startswith("0: label A") for line in lines)


def test_explain_names_the_register_path_for_running_aggregates() -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t (id INTEGER, x INTEGER, y DOUBLE)")
    lines = [r[0] for r in con.sql("EXPLAIN " + AGGREGATES).fetchall()]
    assert "path: registers" in lines
    assert "automaton: thread VM (DEFINE reads registers)" in lines
    # an argument the bytecode cannot read keeps the query on the reference, named
    lines = [
        r[0]
        for r in con.sql(
            "EXPLAIN " + AGGREGATES.replace("SUM(B.x)", "SUM(B.x + MATCH_NUMBER())")
        ).fetchall()
    ]
    assert "path: reference" in lines
    assert any("MATCH_NUMBER() inside a running aggregate" in line for line in lines)


def test_explain_nested_and_plain() -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t (id INTEGER, x INTEGER, y INTEGER)")
    inner = ROW_LOCAL.replace("FROM t", "FROM (SELECT fx AS id, fx AS x FROM (" + REGISTERS + "))")
    lines = [r[0] for r in con.sql("EXPLAIN " + inner).fetchall()]
    assert "path: registers" in lines and "path: row_local" in lines
    assert lines[0] == "-- MATCH_RECOGNIZE #1 of 2"
    plain = con.sql("EXPLAIN SELECT 1").fetchall()
    assert plain and "MATCH_RECOGNIZE" not in str(plain)
