"""``matchsql warm-up`` reaches every compiled kernel a CPU path launches from Python.

The warm-up exists so that no user query waits for a compiler; a kernel it misses is
compiled in front of the user again. The check runs the warm-up in a fresh process
(the test process has loaded kernels of its own) and lists, there, every cached
kernel of the package, every variant of the automaton kernel and its partition loop,
and which of them the warm-up's statements loaded or compiled.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from matchsql.cli.warm_up import statements

pytestmark = pytest.mark.xdist_group("warm_up")

#: Kernels that only other kernels call: their machine code is compiled into their
#: callers', so loading a caller from the cache gives them no entry of their own.
INSIDE_ONLY = {
    "matchsql.engine.compiled.kernel._condition",
    "matchsql.engine.compiled.kernel.compare",
    "matchsql.engine.compiled.kernel.load_row",
    "matchsql.engine.compiled.kernel.memo_horizon",
    "matchsql.engine.compiled.kernel.put_record",
    "matchsql.engine.compiled.kernel.shape_condition",
    "matchsql.engine.compiled.within.past",
    "matchsql.engine.compiled.partition_loop.close_call",
    "matchsql.execution.router.grouping._row_in_order",
}
#: Kernels the warm-up does not reach, each with why (none at present).
NOT_REACHED: set[str] = set()

_PROBE = r"""
import importlib, json, pkgutil, sys
import matchsql
from numba.core.dispatcher import Dispatcher
from matchsql.cli.warm_up import warm_up
from matchsql.engine.compiled import kernel, partition_loop

failed = warm_up(quiet=True)
names = [m.name for m in pkgutil.walk_packages(matchsql.__path__, "matchsql.")
         if not m.name.endswith("__main__") and ".gpu" not in m.name
         and ".spark" not in m.name]
cached = {}
for name in names:
    module = importlib.import_module(name)
    for attr, value in vars(module).items():
        if isinstance(value, Dispatcher) and value.py_func.__module__ == name \
                and type(value._cache).__name__ == "FunctionCache":
            cached[f"{name}.{attr}"] = len(value.overloads)
variants = {json.dumps(key): len(partition_loop._drivers[k].overloads)
            if k in partition_loop._drivers else 0 for key, k in kernel._variants.items()}
full_loop = partition_loop._drivers.get(kernel.run_attempts)
print(json.dumps({"failed": failed, "cached": cached, "variants": variants,
                  "full": len(kernel.run_attempts.overloads),
                  "full_loop": len(full_loop.overloads) if full_loop is not None else 0}))
"""


@pytest.fixture(scope="module")
def probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_statement_runs(probe: dict) -> None:
    assert probe["failed"] == 0


def test_every_kernel_variant_and_its_partition_loop_is_reached(probe: dict) -> None:
    """The variants are (stack interpreter, ALL MATCHES, dead-end memo): all eight, each
    through its compiled partition loop, and the full kernel, alone and through its
    partition loop."""
    from matchsql.engine.compiled.kernel import FEATURES

    stack, ends, memo = (FEATURES.index(f) for f in ("F_STACK", "F_ENDS", "F_MEMO"))
    reached = {}
    for key, loops in probe["variants"].items():
        flags = json.loads(key)
        reached[(flags[stack], flags[ends], flags[memo])] = loops
    assert set(reached) == set(itertools.product((False, True), repeat=3))
    assert all(loops >= 1 for loops in reached.values()), reached
    assert probe["full"] >= 1 and probe["full_loop"] >= 1


def test_every_cached_kernel_called_from_python_is_reached(probe: dict) -> None:
    cached = probe["cached"]
    assert len(cached) >= 15  # the enumeration found the package's kernels
    missed = {name for name, overloads in cached.items() if overloads == 0}
    assert missed <= INSIDE_ONLY | NOT_REACHED, sorted(missed - INSIDE_ONLY - NOT_REACHED)
    # A name listed here that the warm-up now reaches (or that is gone) is a stale list.
    assert INSIDE_ONLY | NOT_REACHED <= set(cached)
    assert not NOT_REACHED & {name for name, n in cached.items() if n}


def test_the_list_reads_only_what_it_creates() -> None:
    """The statements read the demo table and their own temporary tables only, so the
    warm-up works in any fresh session."""
    sqls = [sql for _, sql in statements()]
    creates = [sql for sql in sqls if sql.startswith("CREATE")]
    assert all(sql.startswith("CREATE TEMP TABLE") for sql in creates)
    assert all("FROM trade" in sql for sql in creates)
