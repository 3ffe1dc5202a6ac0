"""How a continuous query's input reaches its matchers: the options of one query.

Kept apart from :class:`matchsql.config.Config` because a query needs more
than the connection's settings - the pattern's linear states for the Go4Risk
model and a place to leave its input metrics - and because the default
(``None`` everywhere) must mean exactly today's pull behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from matchsql.engine.states import StateSpec, label_states, states_from_pattern
from matchsql.execution.adaptive.statistics import Sliding
from matchsql.plan.pattern import PatternNode

MODES = ("pull", "push", "adaptive")
RULES = ("most_tuples", "total_pressure", "per_partition")


@dataclass
class InputOptions:
    """Input mode of one continuous query and where its metrics go.

    ``stats``, when given, is filled in place with :meth:`InputMetrics.row`
    when the query ends (or is closed), so a caller holding the dict - e.g.
    ``Result.stats`` - sees the numbers without another channel.
    """

    mode: str = "pull"
    adaptive_u: int | str = 0  # or "auto" (execution/adaptive/auto_u.py)
    states: Sequence[StateSpec] = ()
    sliding: Sliding = Sliding.NEXT_ROW
    stats: dict | None = field(default=None)
    rule: str = (
        "most_tuples"  # execution/adaptive/switch.py: most_tuples | total_pressure | per_partition
    )
    memory_budget: int = 0  # tuples, for adaptive_u = "auto" (0: none)

    #: Linear state of each LABEL instruction of the pattern's program, for
    #: matchers that count statistics per tuple (empty: they count per batch).
    label_state: Sequence[int] = ()

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"adaptive rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if self.mode not in MODES:
            raise ValueError(f"input mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    @classmethod
    def for_pattern(
        cls,
        pattern: PatternNode,
        mode: str = "pull",
        adaptive_u: int | str = 0,
        sliding: Sliding = Sliding.NEXT_ROW,
        stats: dict | None = None,
        rule: str = "most_tuples",
        memory_budget: int = 0,
    ) -> InputOptions:
        """Options whose Go4Risk model uses ``pattern``'s linearised states."""
        options = cls(
            mode, adaptive_u, states_from_pattern(pattern), sliding, stats, rule, memory_budget
        )
        options.label_state = label_states(pattern)[1]
        return options
