"""The simulator tests run only where numba's CUDA simulator is on.

numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, so this
folder cannot switch it on inside a test process that already loaded numba:
``tests/gpu/test_simulator.py`` runs the folder in a child process with the
variable set; a process started with it set runs them directly.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"):
        skip = pytest.mark.skip(reason="needs NUMBA_ENABLE_CUDASIM=1 (run by test_simulator.py)")
        for item in items:
            if "tests/gpu/sim" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)
