"""sqlglot expression classes for row pattern recognition.

The dialect parses a ``MATCH_RECOGNIZE`` table factor into
:class:`MatchRecognizeTable`; everything around it stays an ordinary sqlglot
tree in DuckDB's dialect. Inside DEFINE and MEASURES the pattern-specific
functions are normalised to the classes below so that consumers (semantic
checks, matchers, code generators) never see sqlglot's look-alikes (sqlglot
parses ``FIRST(x)`` as an aggregate, ``PREV`` as an anonymous function, and
``MATCH_NUMBER`` without parentheses as a column).

Shapes the consumers rely on, after normalisation:

* a column of a pattern variable or subset: ``exp.Column(this=Identifier(col),
  table=Identifier(VAR))``; an unqualified column (universal variable) has no
  ``table``. Variable names are stored upper-cased unless quoted.
* ``COUNT(*)``: ``exp.Count(this=exp.Star())``; ``COUNT(A.*)``:
  ``exp.Count(this=exp.Column(this=exp.Star(), table=Identifier(A)))``.
* other aggregates are sqlglot's ``exp.AggFunc`` subclasses (Sum, Avg, Min,
  Max, ArgMax, ...), never :class:`Navigation`.
* ``PREV/NEXT/FIRST/LAST(expr [, n])``: :class:`Navigation` with an int offset.
* ``RUNNING x`` / ``FINAL x``: :class:`PatternSemantics` around a navigation
  or an aggregate (or CLASSIFIER/MATCH_NUMBER, where it has no effect).
* ``CLASSIFIER()`` / ``CLASSIFIER(V)``: :class:`Classifier`;
  ``MATCH_NUMBER()`` (and DejaVu's bare ``MATCH_NUMBER``): :class:`MatchNumber`.
"""

from __future__ import annotations

from sqlglot import exp


class MeasureDef(exp.Expression):
    """``expr AS name`` in MEASURES; ``this`` is the expression, ``alias`` the name."""

    arg_types = {"this": True, "alias": True}


class SubsetDef(exp.Expression):
    """``SUBSET U = (A, B)``: ``this`` is the name, ``expressions`` the variable names."""

    arg_types = {"this": True, "expressions": True}


class VariableDef(exp.Expression):
    """``V AS condition`` in DEFINE."""

    arg_types = {"this": True, "expression": True}


class RowPattern(exp.Expression):
    """Holds the parsed :class:`matchsql.plan.pattern.PatternNode` in ``this``."""

    arg_types = {"this": True}


#: Meta key set on a MATCH_RECOGNIZE the parser built: its clauses are its statement text's,
#: so the compiled queries' key (:func:`matchsql.engine.compiled_query.compile_match`) need not
#: write them out again; a node built otherwise (a row pattern window's) lacks it.
FROM_TEXT = "from_text"


class MatchRecognizeTable(exp.Expression):
    """``<table factor> MATCH_RECOGNIZE ( ... ) [AS alias [(columns)]]``.

    ``this`` is the input table factor (table, subquery, function call, ...).
    ``rows`` is one of ``ONE``, ``ALL SHOW``, ``ALL OMIT``, ``ALL WITH UNMATCHED``.
    ``after`` is ``PAST LAST ROW``, ``TO NEXT ROW``, ``TO FIRST``, ``TO LAST``
    or ``TO`` with ``after_var`` naming the variable. ``initial`` is False for
    SEEK. DejaVu's clauses: ``all_matches`` (ALL MATCHES) and ``match_mode``
    (``MAXIMAL`` or ``INCREMENTAL``). ``within`` is an interval expression.
    """

    arg_types = {
        "this": True,
        "partition_by": False,
        "order": False,
        "measures": False,
        "rows": False,
        "after": False,
        "after_var": False,
        "initial": False,
        "pattern": True,
        "within": False,
        "subsets": False,
        "define": False,
        "all_matches": False,
        "match_mode": False,
        "alias": False,
    }
