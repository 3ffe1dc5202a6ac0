"""Freed memory kept for the next statement (matchsql/runtime/allocator.py).

Each case runs in a fresh interpreter: the settings are per process and
cannot be taken back. The measure is the one the settings are for: the page
faults of a buffer allocated, freed and allocated again.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

#: Connects, then runs three rounds of a statement's worth of buffers: four of 8 MiB,
#: each written through, then all freed. glibc by default maps the first round afresh,
#: takes the second from its heap and trims that back (more than twice its threshold
#: free), so the third faults every page in again.
_PROBE = """
import ctypes, json, resource
import matchsql
from matchsql.runtime import allocator
con = matchsql.connect(demo=False)

def faults_of_a_round():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffers = [bytearray(8 << 20) for _ in range(4)]
    for buffer in buffers:
        ctypes.memset((ctypes.c_char * len(buffer)).from_buffer(buffer), 1, len(buffer))
    del buffers
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults_of_a_round(), faults_of_a_round()
print(json.dumps({"kept": allocator.keep_freed_memory(), "faults": faults_of_a_round(),
                  "rows": con.sql("SELECT 42").fetchall()}))
"""
#: A round is 8,192 pages: faulted in anew without the settings, already mapped with them.
_PAGES = 4 * (8 << 20) // 4096


def _probe(**env: str) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "MATCHSQL_KEEP_FREED_MEMORY")
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_connection_keeps_freed_memory_warm_for_the_next_allocation():
    got = _probe()
    assert got["kept"] is True
    assert got["faults"] < _PAGES // 8
    assert got["rows"] == [[42]]  # (a tuple through JSON)


def test_glibcs_defaults_where_the_user_opts_out():
    got = _probe(MATCHSQL_KEEP_FREED_MEMORY="0")
    assert got["kept"] is False
    assert got["faults"] > _PAGES // 2  # the buffer was given back and faulted in again


@pytest.mark.parametrize(
    "variable, value",
    [
        ("MALLOC_TRIM_THRESHOLD_", "131072"),
        ("MALLOC_MMAP_THRESHOLD_", "131072"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
    ],
)
def test_the_users_own_glibc_settings_are_left_alone(variable, value):
    got = _probe(**{variable: value})
    assert got["kept"] is False
    assert got["faults"] > _PAGES // 2
