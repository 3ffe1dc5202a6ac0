"""The worker's side of a continuous query (filled in below)."""

from __future__ import annotations


class Streamed:
    pass
