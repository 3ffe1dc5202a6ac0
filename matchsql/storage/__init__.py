"""Stores: the live stream store (shared-memory queue, producers), the archived store."""

from matchsql.storage.producer import Producer

__all__ = ["Producer"]
