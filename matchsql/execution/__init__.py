"""Running a compiled query: routers, live sources, input modes, worker processes."""
