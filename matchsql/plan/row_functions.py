"""The row pattern functions inside DEFINE and MEASURES, as sqlglot expression classes.

The dialect normalises ``PREV/NEXT/FIRST/LAST``, ``RUNNING/FINAL``,
``CLASSIFIER`` and ``MATCH_NUMBER`` to these classes (see
:mod:`matchsql.grammar.nodes` for the shapes consumers rely on); the binder of
:mod:`matchsql.plan.binder` then turns every tree that contains them into the
bound form. They live in the plan package because both the grammar (which
builds them) and the binder (which resolves them) depend on them.
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import exp

NAVIGATION_KINDS = ("PREV", "NEXT", "FIRST", "LAST")


class Navigation(exp.Expression):
    """``PREV/NEXT`` (physical) or ``FIRST/LAST`` (logical) navigation.

    ``kind`` is one of :data:`NAVIGATION_KINDS`; ``offset`` is a non-negative
    Python int (default 1 for PREV/NEXT, 0 for FIRST/LAST).
    """

    arg_types = {"this": True, "kind": True, "offset": False}

    @property
    def kind(self) -> str:
        kind: str = self.args["kind"]
        return kind

    @property
    def offset(self) -> int:
        offset = self.args.get("offset")
        if offset is None:
            return 1 if self.kind in ("PREV", "NEXT") else 0
        given: int = offset
        return given

    @property
    def physical(self) -> bool:
        return self.kind in ("PREV", "NEXT")


class PatternSemantics(exp.Expression):
    """``RUNNING expr`` or ``FINAL expr``."""

    arg_types = {"this": True, "final": True}

    @property
    def final(self) -> bool:
        return bool(self.args["final"])


class Classifier(exp.Expression):
    """``CLASSIFIER()`` or ``CLASSIFIER(V)``: the variable a row was mapped to."""

    arg_types = {"this": False}  # optional variable or subset name (str)

    @property
    def variable(self) -> str | None:
        return self.args.get("this")


class MatchNumber(exp.Expression):
    """``MATCH_NUMBER()``: sequential number of the match in its partition, from 1."""

    arg_types: ClassVar[dict[str, bool]] = {}


class DuckDBAggregate(exp.Expression):
    """An aggregate of a DEFINE that DuckDB computes (see
    :mod:`matchsql.grammar.duckdb_aggregates`): ``sql`` is a query over parameters
    ``$1``..``$n``, the lists of the values each of ``expressions`` (the reads of the
    aggregated rows) takes over the rows the aggregate visits; ``text`` is the aggregate
    as written, for messages."""

    arg_types = {"expressions": True, "sql": True, "text": True}

    @property
    def query(self) -> str:
        query: str = self.args["sql"]
        return query
