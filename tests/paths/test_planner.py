"""Path selection, forcing a path, and EXPLAIN output."""

from __future__ import annotations

import pytest

import matchsql
from bench.queries import DEJAVU
from matchsql.planner import choose_path
from tests.property.strategies import spec_of

ROW_LOCAL = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS x > PREV(x))"""
REGISTERS = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE B AS x < A.x, C AS x > PREV(x))"""
REFERENCE = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(x) AS fx
  ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS SUM(B.x) < 10)"""


def test_choose_path() -> None:
    assert choose_path(spec_of(ROW_LOCAL)).name == "row_local"
    assert choose_path(spec_of(REGISTERS)).name == "registers"
    choice = choose_path(spec_of(REFERENCE))
    assert choice.name == "reference" and "SUM" in choice.reason
    assert choose_path(spec_of(ROW_LOCAL), "reference").name == "reference"
    assert choose_path(spec_of(ROW_LOCAL), "registers").name == "registers"


def test_forcing_a_path_that_does_not_apply_is_an_error() -> None:
    with pytest.raises(matchsql.Error, match="does not apply"):
        choose_path(spec_of(REGISTERS), "row_local")
    with pytest.raises(matchsql.Error, match="does not apply.*SUM"):
        choose_path(spec_of(REFERENCE), "registers")
    con = matchsql.connect(demo=False)
    with pytest.raises(matchsql.Error, match="execution_path must be one of"):
        con.sql("SET execution_path = 'fast'")


@pytest.mark.parametrize("name", sorted(DEJAVU))
def test_dejavu_queries_take_the_register_path(name: str) -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE trade (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    lines = [r[0] for r in con.sql("EXPLAIN " + DEJAVU[name].rstrip(";")).fetchall()]
    assert "path: registers" in lines
    assert any(line.strip().startswith("0: label A") for line in lines)


def test_explain_nested_and_plain() -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t (id INTEGER, x INTEGER, y INTEGER)")
    inner = ROW_LOCAL.replace("FROM t", "FROM (SELECT fx AS id, fx AS x FROM (" + REGISTERS
                              + "))")
    lines = [r[0] for r in con.sql("EXPLAIN " + inner).fetchall()]
    assert "path: registers" in lines and "path: row_local" in lines
    assert lines[0] == "-- MATCH_RECOGNIZE #1 of 2"
    plain = con.sql("EXPLAIN SELECT 1").fetchall()
    assert plain and "MATCH_RECOGNIZE" not in str(plain)
