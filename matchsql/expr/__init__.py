"""SQL values and the evaluation of bound row pattern expressions.

``values`` is the one value library (three-valued logic, casts, intervals,
comparisons, DuckDB's arithmetic and NULL rules); ``aggregates`` the aggregate
functions over a match's rows; ``support`` says which backend evaluates which
bound node. The matchers in :mod:`matchsql.engine` are the backends' callers.
"""
