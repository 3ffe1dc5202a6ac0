"""input_mode and adaptive_u settings (issue 6)."""

from __future__ import annotations

import pytest

from matchsql.config import Config
from matchsql.errors import Error


def test_defaults_and_valid_values() -> None:
    config = Config()
    assert (config.input_mode, config.adaptive_u) == ("pull", 0)
    config.set("INPUT_MODE", "Adaptive")
    config.set("adaptive_u", "0")
    assert (config.input_mode, config.adaptive_u) == ("adaptive", 0)
    assert Config.from_options({"input_mode": "push", "adaptive_u": 10}).adaptive_u == 10


def test_auto_u_and_its_memory_budget() -> None:
    config = Config()
    assert config.adaptive_memory_budget == 0
    config.set("adaptive_u", " AUTO ")
    config.set("adaptive_memory_budget", "20000")
    assert (config.adaptive_u, config.adaptive_memory_budget) == ("auto", 20_000)
    with pytest.raises(Error, match="or auto"):
        config.set("adaptive_u", "automatic")
    config.set("adaptive_u", 3)
    assert config.adaptive_u == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("input_mode", "both"),
        ("adaptive_u", -1),
        ("adaptive_u", "x"),
        ("max_threads", 0),
        ("adaptive_memory_budget", -1),
        ("adaptive_memory_budget", "auto"),
        ("adaptive_rule", "busiest"),
    ],
)
def test_invalid_values_are_refused(name: str, value: object) -> None:
    with pytest.raises(Error):
        Config().set(name, value)
