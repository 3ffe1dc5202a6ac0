"""Benchmark queries: the DejaVu thesis' Q1-Q4 verbatim (listings 5.1-5.4) and friends."""

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
