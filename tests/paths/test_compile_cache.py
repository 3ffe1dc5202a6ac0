"""The numba cache is keyed by the kernels' sources, so an update never loads stale code.

numba checks only the stamp of the file that defines a cached function; a kernel whose
callee in another module changed would otherwise come back from the cache unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from matchsql.runtime.compile_cache import PACKAGE_ROOT, keyed_directory, sources_key

ROOT = Path(__file__).resolve().parents[2]


def _numba_modules() -> list[str]:
    """Every package module that defines a cached numba function."""
    names = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        if "cache=True" in path.read_text():
            relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
            names.append(".".join(relative.parts))
    return names


def _copy_package(source: Path, target: Path) -> None:
    for path in source.rglob("*.py"):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(path.read_bytes())


def test_a_change_to_any_numba_source_changes_the_key(tmp_path: Path) -> None:
    package = tmp_path / "matchsql"
    _copy_package(PACKAGE_ROOT, package)
    before = sources_key(package)
    assert before == sources_key(PACKAGE_ROOT)
    callee = package / "engine" / "compiled" / "within.py"  # called by the thread VM's kernel
    callee.write_text(callee.read_text() + "\n# changed\n")
    assert sources_key(package) != before


def test_a_change_to_code_without_numba_keeps_the_key(tmp_path: Path) -> None:
    package = tmp_path / "matchsql"
    _copy_package(PACKAGE_ROOT, package)
    before = sources_key(package)
    plain = package / "errors.py"
    assert b"numba" not in plain.read_bytes()
    plain.write_text(plain.read_text() + "\n# changed\n")
    assert sources_key(package) == before


def test_an_inherited_keyed_directory_is_replaced_not_nested(tmp_path: Path) -> None:
    first = keyed_directory(str(tmp_path), "sources-0123456789abcdef")
    assert first == str(tmp_path / "sources-0123456789abcdef")
    assert keyed_directory(first, "sources-fedcba9876543210") == str(
        tmp_path / "sources-fedcba9876543210"
    )
    # a base whose own name merely starts like a key is kept
    assert keyed_directory(str(tmp_path / "matchsql-numba-x"), "sources-0123456789abcdef") == str(
        tmp_path / "matchsql-numba-x" / "sources-0123456789abcdef"
    )


SCRIPT = """
import importlib, json, sys
from numba.core.dispatcher import Dispatcher
paths = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    for attr, value in vars(module).items():
        cache = value._cache if isinstance(value, Dispatcher) else None
        if getattr(cache, "_cache_path", None) and value.__module__ == name:
            paths[name + "." + attr] = str(cache._cache_path)
print(json.dumps(paths))
"""


def test_every_cached_kernel_lives_in_the_keyed_directory(tmp_path: Path) -> None:
    modules = [name for name in _numba_modules() if not name.startswith("matchsql.engine.gpu")]
    assert "matchsql.engine.compiled.kernel" in modules
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    paths = json.loads(done.stdout.strip().splitlines()[-1])
    assert paths, "no cached numba function found"
    keyed = tmp_path / sources_key()
    stray = {name: path for name, path in paths.items() if keyed not in Path(path).parents}
    assert not stray
