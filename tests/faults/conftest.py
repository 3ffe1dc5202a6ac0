"""Fault-injection tests reuse the live-stream fixtures: an isolated registry, spawned processes."""

from tests.streams.conftest import con, runtime_dir, scratch_fs, spawn  # noqa: F401 - fixtures
