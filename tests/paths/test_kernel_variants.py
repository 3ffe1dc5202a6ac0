"""Kernel variants (:func:`matchsql.engine.compiled.kernel.attempts_kernel`) give the full
kernel's rows.

A variant is the thread VM compiled without the features a query does not use, so that
a cold start compiles less. Each query here runs on the registers path with the variant
chosen for it and again with the full kernel forced; the rows must be equal, and the
variant must be a lean one (not the full kernel) where the query uses no rare feature.
"""

from __future__ import annotations

import pytest

import matchsql
from matchsql.engine.compiled import kernel as K
from matchsql.storage.demo import synthetic_trades
from matchsql.testing.dejavu_queries import DEJAVU

STACK = """SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n, SUM(B.price) AS s
  {rows}
  PATTERN (A B+ C)
  DEFINE B AS B.price < A.price * 1.01 AND SUM(B.volume) < 5000,
         C AS C.price > PREV(C.price))"""
SKIP_TO = """SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B
  PATTERN (A B+ C)
  DEFINE B AS B.price < A.price, C AS C.price > PREV(C.price))"""

CASES = {
    **{name: (sql.rstrip().rstrip(";"), True) for name, sql in DEJAVU.items()},
    **{
        f"{name} one row": (
            sql.rstrip().rstrip(";").replace("ALL MATCHES", "ONE ROW PER MATCH"),
            True,
        )
        for name, sql in DEJAVU.items()
    },
    "stack, one row": (STACK.format(rows="ONE ROW PER MATCH"), True),
    "stack, all matches": (STACK.format(rows="ALL ROWS PER MATCH ALL MATCHES"), True),
    "skip to (full kernel)": (SKIP_TO, False),
}


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect(demo=False, threads=1, execution_path="registers")
    connection.duckdb.register("trade_src", synthetic_trades(3000, 3, 11))
    connection.sql("CREATE TABLE trade AS SELECT * FROM trade_src")
    yield connection
    connection.close()


@pytest.mark.parametrize("name", list(CASES))
def test_variant_equals_full_kernel(con, name: str, monkeypatch) -> None:
    sql, lean = CASES[name]
    chosen: list = []
    choose = K.attempts_kernel

    def spy(*args):
        kernel = choose(*args)
        chosen.append(kernel)
        return kernel

    monkeypatch.setattr(K, "attempts_kernel", spy)
    got = con.sql(sql).fetchall()
    assert chosen and all((k is not K.run_attempts) == lean for k in chosen)
    monkeypatch.setattr(K, "attempts_kernel", lambda *args: K.run_attempts)
    expected = con.sql(sql).fetchall()
    assert got == expected
    assert len(got) > 0  # the data has matches


def test_few_variants() -> None:
    """Variants are few (a cold test run compiles each once): ALL MATCHES or not, the
    stack interpreter or not, the dead ends or not."""
    assert len(K._variants) <= 8


MEMO = """SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n
  ONE ROW PER MATCH
  PATTERN ({pattern})
  DEFINE {define})"""


@pytest.mark.parametrize(
    "pattern, define, may_help",
    [
        # every thread carries its own start row in A's register: states never recur
        ("A B+ C", "B AS B.price < A.price, C AS C.price > PREV(C.price)", False),
        # only PREV: nothing per attempt
        ("A B+ C", "B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)", True),
        # A read but B may start an attempt too: B's threads can recur
        ("(A | B) C+", "A AS A.price > 100, C AS C.price > PREV(C.price) AND C.price > 1", True),
        # A read, but later rows can take A as well (A+): A's last row is not the start
        ("A+ B", "B AS B.price < A.price", True),
        # a condition reads the start row: off whatever the pattern
        ("A B+", "B AS B.price < FIRST(price)", False),
    ],
)
def test_dead_ends_only_where_states_can_recur(
    con, monkeypatch, pattern: str, define: str, may_help: bool
) -> None:
    """The kernel variant carries the dead ends (``K.MEMO_EVERY``) only where two
    attempts' threads can be equal; where it does not, the rows equal the full kernel's
    (which always has them)."""
    sql = MEMO.format(pattern=pattern, define=define)
    seen: list[bool] = []
    choose = K.attempts_kernel

    def spy(prog, conj, code, params, stat_state, wend, observed):
        seen.append(K.dead_ends_may_help(prog, code, conj, observed))
        return choose(prog, conj, code, params, stat_state, wend, observed)

    monkeypatch.setattr(K, "attempts_kernel", spy)
    got = con.sql(sql).fetchall()
    assert seen and set(seen) == {may_help}
    monkeypatch.setattr(K, "attempts_kernel", lambda *args: K.run_attempts)
    assert got == con.sql(sql).fetchall()
