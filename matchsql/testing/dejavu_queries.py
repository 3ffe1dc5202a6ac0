"""The DejaVu thesis' test queries Q1-Q4, verbatim (listings 5.1-5.4).

They read the ``trade(symbol, price, volume, ts)`` table; :func:`over` points
one at another source (a live stream, say). Q1 and Q3 treat the data as one
partition (contiguous matching), Q2 and Q4 partition by symbol; Q1 and Q2
slide past the last row (tumbling window), Q3 and Q4 to the next row.
"""

from __future__ import annotations

_DEJAVU = """SELECT * FROM trade MATCH_RECOGNIZE(
  {partition}MEASURES MATCH_NUMBER AS matchno
  AFTER MATCH SKIP {skip}
  ALL MATCHES
  PATTERN(A B+ C* D+)
  DEFINE /* A defaults to True, matches any row */
    B AS (B.Price < A.Price AND B.Price <= PREV(B.Price))
    C AS (C.Price > B.Price AND C.Price >= PREV(C.Price) AND C.
      Price <= A.Price)
    D AS (D.Price > PREV(D.Price) AND D.Price > A.Price)
);"""

Q1 = _DEJAVU.format(partition="", skip="PAST LAST ROW")
Q2 = _DEJAVU.format(partition="PARTITION BY symbol\n  ", skip="PAST LAST ROW")
Q3 = _DEJAVU.format(partition="", skip="TO NEXT ROW")
Q4 = _DEJAVU.format(partition="PARTITION BY symbol\n  ", skip="TO NEXT ROW")

DEJAVU = {"Q1": Q1, "Q2": Q2, "Q3": Q3, "Q4": Q4}


def over(query: str, source: str) -> str:
    """``query`` reading ``source`` instead of ``trade`` (and without the final ';')."""
    return query.replace("SELECT * FROM trade ", f"SELECT * FROM {source} ", 1).rstrip().rstrip(";")
