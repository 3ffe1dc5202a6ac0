"""Benchmark queries: the DejaVu thesis' Q1-Q4 verbatim (listings 5.1-5.4).

The texts live in :mod:`matchsql.testing.dejavu_queries` (the ``matchsql experiment``
command needs them too, and the package must not import from ``bench``).
"""

from matchsql.testing.dejavu_queries import _DEJAVU, DEJAVU, Q1, Q2, Q3, Q4

__all__ = ["_DEJAVU", "DEJAVU", "Q1", "Q2", "Q3", "Q4"]
