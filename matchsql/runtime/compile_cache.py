"""Where numba caches the compiled kernels: one directory per version of their sources.

numba invalidates a cached function when the file that defines it changes, but not
when a function it calls, defined in another module, changes: the kernels call helpers
across modules (the DFA calls the thread VM's, the thread VM the WITHIN rule's), so
after an update a cache keyed by file stamps alone would hand back machine code built
from the old helpers, and queries would silently return the old semantics. The cache
directory is therefore keyed by a hash of every package source that numba code lives
in; any change to one of them starts a fresh directory.

The base is ``NUMBA_CACHE_DIR`` (the Makefile points it at the checkout's
``.numba_cache``) or, without it, the user's cache directory. The keyed directory is
written back to ``NUMBA_CACHE_DIR`` so that processes started from this one (workers,
the REPL under test) use the same directory instead of nesting a second key.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # matchsql/, not runtime/
_KEYED = re.compile(r"sources-[0-9a-f]{16}")
_NUMBA_MARKERS = (b"numba", b"njit")


def sources_key(root: Path = PACKAGE_ROOT) -> str:
    """A hash of the package's sources that hold numba code (their paths and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if any(marker in text for marker in _NUMBA_MARKERS):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(b"\0")
            digest.update(text)
            digest.update(b"\0")
    return "sources-" + digest.hexdigest()[:16]


def keyed_directory(base: str | None, key: str) -> str:
    """The cache directory for ``key`` under ``base``; a base that is already a keyed
    directory (inherited from a parent process) is replaced, not nested."""
    if not base:
        cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache"
        )
        base = os.path.join(cache_home, "matchsql", "numba")
    if _KEYED.fullmatch(os.path.basename(os.path.normpath(base))):
        base = os.path.dirname(os.path.normpath(base))
    return os.path.join(base, key)


_chosen: str | None = None


def use_keyed_cache() -> str:
    """Point numba's cache at this source version's directory (once per process); call
    before any ``cache=True`` function is defined."""
    global _chosen
    if _chosen is None:
        _chosen = keyed_directory(os.environ.get("NUMBA_CACHE_DIR"), sources_key())
        os.environ["NUMBA_CACHE_DIR"] = _chosen
        config: Any = sys.modules.get("numba.core.config")
        if config is not None:  # numba read its environment already: tell it directly
            config.CACHE_DIR = _chosen
    return _chosen


#: The file :mod:`matchsql.cli.warm_up` leaves in a keyed directory it has filled.
WARMED = "warmed-up"


def warmed_up() -> bool:
    """Whether this source version's cache directory was filled by the warm-up."""
    return os.path.exists(os.path.join(use_keyed_cache(), WARMED))


def mark_warmed_up() -> None:
    """Record that the warm-up filled this source version's cache directory."""
    directory = use_keyed_cache()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(directory, WARMED), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.close(fd)
