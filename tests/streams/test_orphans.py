"""Segments whose creating process died are reclaimed even without a registry entry."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pyarrow as pa

from matchsql.storage.shm_ring import Ring, sweep_orphans, unlink_segment

SCHEMA = pa.schema([("x", pa.int64())])

CREATE_AND_CRASH = """
import os, sys
import pyarrow as pa
from matchsql.storage.shm_ring import Ring
Ring.create(sys.argv[1], pa.schema([("x", pa.int64())]), 16, "block")
os._exit(0)  # no clean-up: as if the process had crashed
"""


def test_sweep_removes_segments_of_dead_owners_only():
    # A prefix of its own, so that sweeps by concurrent test processes leave it alone.
    prefix = f"msqltest-{os.getuid()}-{uuid.uuid4().hex[:8]}"
    dead, live = f"/{prefix}a", f"/{prefix}b"
    subprocess.run([sys.executable, "-c", CREATE_AND_CRASH, dead], check=True, timeout=60)
    assert os.path.exists(f"/dev/shm{dead}")
    ring = Ring.create(live, SCHEMA, 16, "block")
    try:
        assert sweep_orphans(prefix) == [dead]
        assert not os.path.exists(f"/dev/shm{dead}")
        assert os.path.exists(f"/dev/shm{live}")  # its owner (this process) still runs
    finally:
        ring.close()
        unlink_segment(live)
        unlink_segment(dead)
