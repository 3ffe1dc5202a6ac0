"""WITHIN: a bound on a match's span in the first ORDER BY column.

The rule the expectations are derived from (the engine's documented
semantics, after Flink's ``WITHIN`` and the SQL:2016 discussion of time
windows): while a match is being built, a row may be consumed only if its
ORDER BY value lies at most the bound away from the value of the match's first
row along the ordering (``|value - first| <= bound``: the bound itself is
inside; ``value - first`` under ASC, ``first - value`` under DESC); a row past it
ends the attempt, and the most preferred match found among the rows before it
is the result (a shorter alternative if the preferred one needed the row). A
NULL value on either side is never outside. The bound is a number for a
numeric ORDER BY column and an INTERVAL for a temporal one.
"""

from __future__ import annotations

import matchsql

from .case import Case, table

T = table(
    "t",
    "id INTEGER, ts INTEGER, price INTEGER",
    [(1, 1, 5), (2, 2, 6), (3, 4, 7), (4, 7, 8), (5, 8, 1), (6, 9, 2), (7, 10, 3), (8, 15, 4)],
)
BIG = table(
    "t", "id INTEGER, ts BIGINT", [(i, 2**60 + k) for i, k in enumerate((0, 1, 2, 3, 5), 1)]
)
DATES = table(
    "t",
    "id INTEGER, ts DATE",
    "(1, DATE '2024-01-01'), (2, DATE '2024-01-02'), (3, DATE '2024-01-04')",
)
M = "FIRST(id) AS f, LAST(id) AS l, COUNT(*) AS c"


def q(source: str, body: str, *, order: str = "ts", measures: str = M) -> str:
    return (
        f"SELECT * FROM {source} MATCH_RECOGNIZE (ORDER BY {order} MEASURES {measures} "
        f"{body}) ORDER BY f"
    )


CASES: list[Case] = [
    Case(
        "within_row_local_next_row",
        T,
        q(
            "t",
            "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) WITHIN 3 DEFINE B AS price > PREV(price)",
        ),
        [(1, 3, 3), (2, 3, 2), (3, 4, 2), (5, 7, 3), (6, 7, 2)],
        "ts 1 2 4 7 8 9 10 15, price rising on 1-4 and 8-15. From ts 1: B takes ts 2 and 4; "
        "ts 7 is 6 after ts 1 (> 3): the match is ids 1-3. From ts 2: ts 4, then ts 7 is 5 "
        "after: ids 2-3. From ts 4: ts 7 is exactly 3 after (inside), ts 8 is 4 after and "
        "its price falls anyway: ids 3-4. From ts 7: price 1 < 8, no B. From ts 8: ts 9 and "
        "10 (2 after), ts 15 is 7 after: ids 5-7. From ts 9: ids 6-7. From ts 10: ts 15 is "
        "5 after: no match. ts 15: nothing follows.",
        tags=("within",),
    ),
    Case(
        "within_register_condition",
        T,
        q(
            "t",
            "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) WITHIN 3 DEFINE B AS price > A.price",
        ),
        [(1, 3, 3), (5, 7, 3)],
        "B compares with the A row. From ts 1 (price 5): ts 2 (6) and ts 4 (7) are B, ts 7 "
        "is 6 after ts 1: ids 1-3; the next attempt is at ts 7 (price 8): ts 8 has price 1, "
        "no match. From ts 8 (price 1): ts 9 and 10 are B, ts 15 is 7 after: ids 5-7. "
        "ts 15: nothing follows.",
        tags=("within",),
    ),
    Case(
        "within_shorter_alternative",
        table("t", "id INTEGER, ts INTEGER, v INTEGER", [(1, 1, 1), (2, 2, 2), (3, 5, 3)]),
        q(
            "t",
            "ONE ROW PER MATCH PATTERN (A B C | A B) WITHIN 3 "
            "DEFINE A AS v = 1, B AS v = 2, C AS v = 3",
        ),
        [(1, 2, 2)],
        "Without WITHIN the preferred alternative A B C matches ids 1-3; C at ts 5 is 4 "
        "after ts 1 (> 3), so the first alternative fails there and A B (ids 1-2) is the "
        "match.",
        tags=("within",),
    ),
    Case(
        "within_zero_same_value",
        table("t", "id INTEGER, ts INTEGER", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]),
        q(
            "t",
            "ORDER BY id PATTERN (A B*) WITHIN 0 DEFINE A AS TRUE".replace("ORDER BY id ", ""),
            order="ts, id",
        ),
        [(1, 2, 2), (3, 5, 3)],
        "WITHIN 0 admits only rows with the start's own ts: from id 1 (ts 1) B takes id 2 "
        "(ts 1) and stops before id 3 (ts 2): ids 1-2; then from id 3 (ts 2) B takes ids 4 "
        "and 5: ids 3-5.",
        tags=("within",),
    ),
    Case(
        "within_null_is_never_outside",
        table("t", "id INTEGER, ts INTEGER", [(1, 1), (2, 5), (3, None), (4, None)]),
        q("t", "PATTERN (A B*) WITHIN 1 DEFINE A AS TRUE", order="ts NULLS LAST, id"),
        [(1, 1, 1), (2, 4, 3)],
        "Rows in ts order, NULLs last: 1, 5, NULL, NULL. From ts 1, ts 5 is 4 after (> 1): "
        "the match is id 1 alone. From ts 5, the NULL rows are never outside the bound: B* "
        "takes ids 3 and 4: ids 2-4.",
        tags=("within",),
    ),
    Case(
        "within_interval",
        table(
            "t",
            "id INTEGER, ts TIMESTAMP, v INTEGER",
            "(1, TIMESTAMP '2024-01-01 10:00:00', 1), (2, TIMESTAMP '2024-01-01 10:04:00', 2),"
            " (3, TIMESTAMP '2024-01-01 10:10:00', 2), (4, TIMESTAMP '2024-01-01 10:11:00', 2),"
            " (5, TIMESTAMP '2024-01-01 10:12:00', 1), (6, TIMESTAMP '2024-01-01 10:30:00', 2)",
        ),
        q("t", "PATTERN (A B+) WITHIN INTERVAL '10' MINUTE DEFINE A AS v = 1, B AS v = 2"),
        [(1, 3, 3)],
        "From 10:00, B takes 10:04 and 10:10 (exactly 10 minutes: inside); 10:11 is past "
        "the bound: ids 1-3. Ids 3 and 4 are not A. From 10:12 the only B is 10:30, 18 "
        "minutes later: no match.",
        tags=("within",),
    ),
    Case(
        "within_partitioned_all_rows",
        table(
            "t",
            "p VARCHAR, id INTEGER, ts INTEGER, v INTEGER",
            [
                ("x", 1, 1, 1),
                ("x", 2, 2, 2),
                ("x", 3, 9, 2),
                ("y", 4, 1, 1),
                ("y", 5, 3, 2),
                ("y", 6, 4, 2),
            ],
        ),
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "MATCH_NUMBER() AS m ALL ROWS PER MATCH PATTERN (A B+) WITHIN 2 "
        "DEFINE A AS v = 1, B AS v = 2) ORDER BY p, id",
        [("x", 1, 1, 1, 1), ("x", 2, 1, 2, 2), ("y", 1, 1, 4, 1), ("y", 3, 1, 5, 2)],
        "Each partition is bounded on its own. x: from ts 1, ts 2 is B, ts 9 is 8 after "
        "(> 2): rows 1-2 as match 1. y: from ts 1, ts 3 (2 after: inside) is B, ts 4 is 3 "
        "after: rows 4-5 as match 1. ALL ROWS PER MATCH: partition column, ORDER BY column, "
        "measure, the other columns: (p, ts, m, id, v).",
        tags=("within",),
    ),
    Case(
        "within_descending_span",
        T,
        q(
            "t",
            "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) WITHIN 3 DEFINE B AS price < PREV(price)",
            order="ts DESC",
        ),
        [(2, 1, 2), (3, 1, 3), (4, 3, 2), (6, 5, 2), (7, 5, 3)],
        "In ts DESC order the rows are (ts, price, id) 15 4 8, 10 3 7, 9 2 6, 8 1 5, "
        "7 8 4, 4 7 3, 2 6 2, 1 5 1; B (price below the previous row's) holds on every row "
        "but ts 7 and ts 15. The span is first - ts <= 3. From ts 15: ts 10 is 5 below, "
        "no B. From ts 10: ts 9 and 8 are B, ts 7 (3 below, inside) is not B: ids 7-5. From "
        "ts 9: ids 6-5. From ts 8: ts 7 is no B. From ts 7: ts 4 (3 below) is B, ts 2 is 5 "
        "below: ids 4-3. From ts 4: ts 2 and 1 (3 below): ids 3-1. From ts 2: ids 2-1.",
        tags=("within",),
    ),
    Case(
        "within_descending_interval",
        table(
            "t",
            "id INTEGER, ts TIMESTAMP, v INTEGER",
            "(1, TIMESTAMP '2024-01-01 10:00:00', 2), (2, TIMESTAMP '2024-01-01 10:04:00', 2),"
            " (3, TIMESTAMP '2024-01-01 10:10:00', 2), (4, TIMESTAMP '2024-01-01 10:11:00', 2),"
            " (5, TIMESTAMP '2024-01-01 10:12:00', 1), (6, TIMESTAMP '2024-01-01 10:30:00', 2)",
        ),
        q(
            "t",
            "PATTERN (A B+) WITHIN INTERVAL '10' MINUTE DEFINE A AS v = 1, B AS v = 2",
            order="ts DESC",
        ),
        [(5, 2, 4)],
        "Latest first: 10:30 is not A. From 10:12 (A), B takes 10:11, 10:10 and 10:04 (8 "
        "minutes earlier); 10:00 is 12 minutes earlier, past the bound, though its v would "
        "be B: ids 5-2. The next attempt, at 10:00, is not A.",
        tags=("within",),
    ),
    Case(
        "within_bigint_keys_above_float_precision",
        BIG,
        q("t", "PATTERN (A+) WITHIN 1 DEFINE A AS TRUE"),
        [(1, 2, 2), (3, 4, 2), (5, 5, 1)],
        "ts is 2**60 + 0, 1, 2, 3, 5 (ids 1-5): one float64 for the first four. From id 1, "
        "id 2 is 1 after (inside), id 3 is 2 after: ids 1-2. From id 3: id 4 inside, id 5 "
        "3 after: ids 3-4. Then id 5 alone.",
        tags=("within",),
    ),
    Case(
        "within_bigint_keys_above_float_precision_descending",
        BIG,
        q("t", "PATTERN (A+) WITHIN 1 DEFINE A AS TRUE", order="ts DESC"),
        [(2, 1, 2), (4, 3, 2), (5, 5, 1)],
        "In ts DESC order: ids 5 4 3 2 1 at 2**60 + 5, 3, 2, 1, 0. From id 5, id 4 is 2 "
        "below: id 5 alone. From id 4: id 3 is 1 below (inside), id 2 is 2 below: ids 4-3. "
        "From id 2: id 1 inside: ids 2-1.",
        tags=("within",),
    ),
    Case(
        "within_bigint_span_past_int64_range",
        table("t", "id INTEGER, ts BIGINT", [(1, -(2**63)), (2, 2**63 - 1)]),
        q("t", "PATTERN (A+) WITHIN 9223372036854775807 DEFINE A AS TRUE"),
        [(1, 1, 1), (2, 2, 1)],
        "The keys are 2**64 - 1 apart, one more than the bound (the largest BIGINT): two "
        "matches of one row.",
        tags=("within",),
    ),
    Case(
        "within_date_keys_descending",
        DATES,
        q("t", "PATTERN (A+) WITHIN INTERVAL '1' DAY DEFINE A AS TRUE", order="ts DESC"),
        [(2, 1, 2), (3, 3, 1)],
        "ts DESC: id 3 (4 January), id 2 (2 January), id 1 (1 January). From id 3, id 2 is "
        "two days earlier, past the bound: id 3 alone. From id 2, id 1 is one day earlier "
        "(inside): ids 2-1.",
        tags=("within",),
    ),
    Case(
        "within_date_keys_under_a_day",
        DATES,
        q("t", "PATTERN (A+) WITHIN INTERVAL '12' HOUR DEFINE A AS TRUE"),
        [(1, 1, 1), (2, 2, 1), (3, 3, 1)],
        "Dates a day or more apart are all more than 12 hours apart: each row alone.",
        tags=("within",),
    ),
    Case(
        "within_number_over_timestamp",
        table("t", "id INTEGER, ts TIMESTAMP", "(1, TIMESTAMP '2024-01-01 10:00:00')"),
        q("t", "PATTERN (A) WITHIN 5 DEFINE A AS TRUE"),
        matchsql.TypeMismatchError,
        "a numeric WITHIN bound needs a numeric ORDER BY column",
        tags=("within",),
    ),
]
