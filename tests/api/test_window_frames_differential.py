"""Row pattern windows against an independent formulation of their semantics.

The formulation: put every row's frame (the row and the rows after it, up to the
frame's end) in a partition of its own and run MATCH_RECOGNIZE over those frames
on the reference path; a row's match is the first match of its frame, which must
start at the row itself under INITIAL and may start anywhere under SEEK (the
attempts at the frame's rows are tried in order, so the first match is the one
with the earliest start). AFTER MATCH SKIP is then replayed here, counted from
the row whose match was sought: TO NEXT ROW skips nothing, PAST LAST ROW skips
up to the match's last row, TO FIRST/LAST v up to that row, which must lie after
the current row; an empty match skips nothing.
"""

from __future__ import annotations

import random

import pytest

import matchsql

MEASURES = "FIRST(id) AS f, LAST(id) AS l, count(*) AS n, LAST(B.x) AS lb, CLASSIFIER() AS c"
PATTERNS = [
    ("A B+ C", ""),
    ("A+ B", ""),
    ("A B? C", ""),
    ("(A | B) C*", ""),
    ("A B*? C", ""),
    ("A+ B", "PREV"),  # B's condition reads the row before: never before the frame
    ("A C* B", "PREV"),
    ("A* B?", ""),  # may match empty
]
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST B", "TO LAST B"]
FRAMES = [None, 0, 1, 3]


def _defines(pattern: str, prev: str) -> str:
    defs = []
    for var in "ABC":
        if var in pattern:
            cond = f"v = '{var.lower()}'"
            if prev and var == "B":
                cond += " AND PREV(x) <= x"
            defs.append(f"{var} AS {cond}")
    return ", ".join(defs)


def _input(con, seed: str) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(48):
        v = rng.choice("aabbc") if rng.random() < 0.9 else None
        x = rng.randrange(6) if rng.random() < 0.9 else None
        rows.append(
            f"({i % 3}, {i}, {'NULL' if v is None else repr(v)}, {'NULL' if x is None else x})"
        )
    con.sql("CREATE TABLE r AS SELECT * FROM (VALUES " + ", ".join(rows) + ") t(p, id, v, x)")


def _first_matches(con, pattern: str, defines: str, end: int | None, skip: str) -> dict:
    """(p, row id) -> (f, l, n, lb, c, skip target id) of the first match in the row's frame."""
    bound = "" if end is None else f" AND b.pos <= a.pos + {end}"
    con.sql(
        "CREATE OR REPLACE TABLE pos AS SELECT *, row_number() OVER "
        "(PARTITION BY p ORDER BY id) AS pos FROM r"
    )
    con.sql(
        "CREATE OR REPLACE TABLE frames AS SELECT a.p, a.id AS fid, b.id, b.v, b.x "
        f"FROM pos a JOIN pos b ON a.p = b.p AND b.pos >= a.pos{bound}"
    )
    words = skip.split()  # TO FIRST B -> FIRST(B.id)
    target = (
        f"{words[1]}({words[2]}.id)" if words[:2] in (["TO", "FIRST"], ["TO", "LAST"]) else "NULL"
    )
    found = con.sql(
        "SELECT p, fid, f, l, n, lb, c, t FROM frames MATCH_RECOGNIZE (PARTITION BY p, fid "
        f"ORDER BY id MEASURES {MEASURES}, {target} AS t, MATCH_NUMBER() AS m ONE ROW PER "
        f"MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {defines}) "
        "WHERE m = 1"
    ).fetchall()
    return {(row[0], row[1]): row[2:] for row in found}


def _expected(con, first: dict, seek: bool, skip: str):
    """Every row's (p, id, f, l, n, lb, c), or ExecutionError where a skip cannot go on."""
    out = []
    for (p,) in con.sql("SELECT DISTINCT p FROM r ORDER BY p").fetchall():
        ids = [i for (i,) in con.sql(f"SELECT id FROM r WHERE p = {p} ORDER BY id").fetchall()]
        at = {row: k for k, row in enumerate(ids)}
        resume = 0
        for k, row in enumerate(ids):
            match = first.get((p, row))
            if k < resume or match is None or (not seek and match[0] not in (None, row)):
                out.append((p, row, None, None, 0, None, None))
                continue
            out.append((p, row, *match[:5]))
            if match[0] is None or skip == "TO NEXT ROW":  # empty, or nothing skipped
                resume = k + 1
            elif skip == "PAST LAST ROW":
                resume = at[match[1]] + 1
            elif match[5] is None or at[match[5]] <= k:
                return matchsql.ExecutionError
            else:
                resume = at[match[5]]
    return out


@pytest.mark.parametrize("mode", ["INITIAL", "SEEK"])
@pytest.mark.parametrize("skip", SKIPS)
@pytest.mark.parametrize(("pattern", "prev"), PATTERNS)
def test_window_matches_first_match_of_each_frame(pattern, prev, skip, mode):
    """On the path the planner picks: the partition scan where it applies (no PREV,
    frames to the partition's end, no empty match), else one run per row's frame."""
    seek = mode == "SEEK"
    defines = _defines(pattern, prev)
    ref = matchsql.connect(demo=False, execution_path="reference")
    con = matchsql.connect(demo=False)
    seed = f"{pattern}/{prev}/{skip}/{mode}"
    _input(ref, seed)
    _input(con, seed)
    for end in FRAMES:
        frame = "UNBOUNDED FOLLOWING" if end is None else f"{end} FOLLOWING"
        want = _expected(ref, _first_matches(ref, pattern, defines, end, skip), seek, skip)
        sql = (
            "SELECT p, id, f OVER w, l OVER w, count(*) OVER w, lb OVER w, c OVER w "
            f"FROM r WINDOW w AS (PARTITION BY p ORDER BY id MEASURES {MEASURES} "
            f"ROWS BETWEEN CURRENT ROW AND {frame} AFTER MATCH SKIP {skip} {mode} "
            f"PATTERN ({pattern}) DEFINE {defines}) ORDER BY p, id"
        )
        if want is matchsql.ExecutionError:
            with pytest.raises(matchsql.ExecutionError, match="AFTER MATCH SKIP"):
                con.sql(sql).fetchall()
            continue
        assert con.sql(sql).fetchall() == want, (frame, sql)
