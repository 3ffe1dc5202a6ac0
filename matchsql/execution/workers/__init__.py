"""Worker processes for one-time MATCH_RECOGNIZE queries (``SET workers = N``).

See :mod:`.worker_router` (routing, ordered merge, State Transfer migration),
:mod:`.pool` (the processes), :mod:`.channel` (shared-memory transport),
:mod:`.balance` (bucket placement and rebalancing), :mod:`.process` (the
worker's loop) and :mod:`.session` (what a connection keeps).
"""
