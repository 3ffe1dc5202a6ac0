"""The suite's ``xdist_group`` marks take effect under ``pytest -n 2 --dist loadgroup``.

The Spark tests share one JVM and the cluster tests one standalone cluster only
because their group keeps them on one xdist worker. pytest-xdist implements the
group by appending ``@<group>`` to the test's node id; a pytest that derives the
node id elsewhere silently drops it, every Spark module then starts its own
session on each worker, and the suite runs minutes longer. This test is the
canary for that combination of versions.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("suite_groups")


def test_group_mark_reaches_the_node_id(request: pytest.FixtureRequest) -> None:
    # a worker's own options say ``dist = no``; the command line it was started from
    # is the controller's
    argv = getattr(request.config, "workerinput", {}).get("mainargv", [])
    if "loadgroup" not in argv and "--dist=loadgroup" not in argv:
        pytest.skip("not an xdist worker of a --dist loadgroup run")
    assert request.node.nodeid.endswith("@suite_groups"), request.node.nodeid
