"""Callbacks that undo what a statement registered, run when its Result closes."""

from __future__ import annotations

from collections.abc import Callable


def run_all(callbacks: list[Callable[[], None]]) -> None:
    """Run and drop every callback, the last registered first."""
    while callbacks:
        callbacks.pop()()
