"""Fixtures for the grammar tests."""

from __future__ import annotations

import pytest
from grammar_helpers import SEED_QUERIES


@pytest.fixture(params=sorted(SEED_QUERIES))
def seed_query(request) -> str:
    return SEED_QUERIES[request.param]
