"""The manual (docs/, built by ``mkdocs build --strict`` in ``make test``) against the code.

The settings page must list every setting of :class:`matchsql.config.Config`
with its real default and range, so adding or changing a setting without
documenting it fails here; the README must stay a short front page.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from matchsql.config import (
    CHOICES,
    SIZE_RANGES,
    WHOLE_RANGES,
    Config,
    default_max_buffered_bytes,
    format_size,
)
from matchsql.errors import Error

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"

#: Defaults computed at connect time, documented in words: the words and the value.
COMPUTED_DEFAULTS = {
    "threads": ("the number of cores", os.cpu_count() or 1),
    "max_buffered_bytes": ("an eighth of the memory", default_max_buffered_bytes()),
}


def settings_table() -> dict[str, tuple[str, str]]:
    """``{setting: (default cell, range cell)}`` from the page's table."""
    rows: dict[str, tuple[str, str]] = {}
    lines = SETTINGS_PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index("| setting | default | range | what it does |")
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].strip("`")
        assert name not in rows, f"{name} is listed twice"
        rows[name] = (cells[1], cells[2])
    return rows


def plain(cell: str) -> str:
    """A default cell as Config would print it: no backticks, no thousands separators."""
    return cell.replace("`", "").replace(",", "").strip()


def test_the_settings_page_lists_every_setting_once():
    assert sorted(settings_table()) == sorted(Config.names())


@pytest.mark.parametrize("field", fields(Config), ids=lambda f: f.name)
def test_each_documented_default_is_the_real_one(field):
    cell, _ = settings_table()[field.name]
    if field.default is MISSING:  # computed when a connection is made
        words, value = COMPUTED_DEFAULTS[field.name]
        assert cell == words and getattr(Config(), field.name) == value
    else:
        assert plain(cell) == str(field.default), (field.name, cell)


@pytest.mark.parametrize("field", fields(Config), ids=lambda f: f.name)
def test_each_documented_range_is_what_set_accepts(field):
    _, cell = settings_table()[field.name]
    default = getattr(Config(), field.name)
    if field.name in SIZE_RANGES:
        low, high = SIZE_RANGES[field.name]
        words = f"size from {format_size(low)} to {format_size(high)}"
        assert cell.startswith(words), cell
        assert low <= default <= high
        config = Config()
        for value, size in (
            (low, low),
            (str(high), high),
            (" 2GiB ", 2 << 30),
            ("1.5 MB", 1_500_000),
            ("512kib", 512 << 10),
            ("4096 bytes", 4096),
        ):
            config.set(field.name, value)
            assert getattr(config, field.name) == size
        for value in (low - 1, high + 1, "1 KB", "2 PiB", "", "-5MB", "1e9", "5 apples", True):
            with pytest.raises(Error, match=f"must be a {words} \\(a number of bytes"):
                config.set(field.name, value)
    elif isinstance(default, int):
        low, high = WHOLE_RANGES[field.name]
        assert cell.startswith(f"whole number from {low:,} to {high:,}"), cell
        assert low <= default <= high
        config = Config()
        for value in (low, high, str(high), f" {low} "):
            config.set(field.name, value)
        for value in (low - 1, high + 1, str(high + 1), "1e3", "1.0", "", "²", "9" * 5000):
            with pytest.raises(Error, match=f"must be a whole number from {low:,} to {high:,}"):
                config.set(field.name, value)
        if "`auto`" in cell:
            config.set(field.name, "auto")
            # workers = auto is the cores; adaptive_u = auto stays the word (U is chosen
            # while the query runs).
            auto = "auto" if field.name == "adaptive_u" else min(os.cpu_count() or 1, high)
            assert getattr(config, field.name) == auto
    else:
        values = re.findall(r"`([^`]+)`", cell)
        assert default in values, (field.name, cell)
        assert tuple(values) == CHOICES[field.name]
        for value in values:
            Config().set(field.name, value.upper())
        with pytest.raises(Error, match=f"must be one of {', '.join(values)}"):
            Config().set(field.name, "no_such_value")


def test_the_readme_is_a_short_front_page_of_the_manual():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    assert "make run" in readme and "make test" in readme
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links, "the README links to the manual"
    for link in links:
        assert (ROOT / link).is_file(), link


def test_every_page_in_the_navigation_exists_and_every_page_is_in_it():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r":\s+(\S+\.md)\s*$", config, flags=re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert nav == pages


def documented_layers() -> dict[str, int]:
    """``{top-level module of matchsql: layer}`` from the architecture page's table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    layers: dict[str, int] = {}
    for number, modules in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, flags=re.M):
        for name in re.findall(r"`([a-z_]+)`", modules):
            assert name not in layers, f"{name} is in two layers"
            layers[name] = int(number)
    return layers


def imports_between_modules() -> set[tuple[str, str]]:
    """(importer, imported) pairs of matchsql's top-level modules, any import anywhere."""
    package = ROOT / "matchsql"
    edges = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        me = parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                dotted = name.split(".")
                if dotted[0] == "matchsql" and len(dotted) > 1 and dotted[1] != me:
                    edges.add((me, dotted[1]))
    return edges


def test_the_architecture_page_names_every_module_in_one_layer():
    package = ROOT / "matchsql"
    modules = {
        p.name.removesuffix(".py")
        for p in package.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").is_file())
        and p.name not in ("__init__.py", "__main__.py")
    }
    assert set(documented_layers()) == modules


def test_no_module_imports_one_of_a_higher_layer_than_the_page_says():
    layers = documented_layers()
    upward = sorted(
        (a, b)
        for a, b in imports_between_modules()
        if a in layers and b in layers and layers[b] > layers[a]
    )
    assert not upward, f"imports that go up the documented layers: {upward}"


def transcripts() -> list[tuple[str, str, str]]:
    """``(page, SQL, expected output)`` of each ``$ matchsql -c "..."`` shown with its output.

    A transcript is a ``text`` block line ``$ [.venv/bin/]matchsql -c "SQL`` (the SQL may
    run over several lines, up to the closing quote), followed by what the command printed.
    """
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        for block in re.findall(r"```text\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for command in re.split(r"^(?=\$ )", block, flags=re.M):
                start = re.match(r'\$ (?:\.venv/bin/)?matchsql -c "', command)
                if not start:
                    continue
                end = command.index('"\n', start.end())
                sql, output = command[start.end() : end], command[end + 2 :]
                found.append((str(page.relative_to(ROOT)), sql, output))
    return found


def test_the_manual_shows_transcripts():
    pages = {page for page, _, _ in transcripts()}
    assert {"README.md", "docs/index.md", "docs/reference/settings.md"} <= pages


@pytest.mark.parametrize(
    ("page", "sql", "output"),
    transcripts(),
    ids=lambda value: value if value.endswith(".md") else "",
)
def test_each_transcript_prints_what_the_manual_shows(page, sql, output):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100", TERM="dumb")
    done = subprocess.run(
        [sys.executable, "-m", "matchsql", "-c", sql],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    printed = done.stdout + done.stderr
    assert printed.strip() == output.strip(), f"{page}:\n{printed}"


REPL_MARKER = "<!-- transcript: the test runs it -->\n```text\n"


def repl_transcripts() -> list[tuple[str, str, str]]:
    """``(page, input, expected output)`` of each REPL session marked as run by this test.

    Lines after ``matchsql> `` and ``...> `` prompts are typed; a ``$ `` line is the
    command that opened the REPL; every other line is what the REPL printed.
    """
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(re.escape(REPL_MARKER) + r"(.*?)```", text, re.S):
            typed, printed = [], []
            for line in block.splitlines():
                prompt = re.match(r"(matchsql| *\.\.\.)> ", line)
                if prompt:
                    typed.append(line[prompt.end() :])
                elif not line.startswith("$ "):
                    printed.append(line)
            found.append((str(page.relative_to(ROOT)), "\n".join(typed) + "\n", "\n".join(printed)))
    return found


def test_the_tutorial_marks_repl_sessions_to_run():
    assert len(repl_transcripts()) >= 5


#: What the REPL does with each entry it reads (matchsql/cli/repl.py), without the terminal.
REPL_LOOP = """
import json, sys
import matchsql
from matchsql.cli.shell import Shell
shell = Shell(matchsql.connect())
for entry in json.load(sys.stdin):
    if entry.startswith(".") and "\\n" not in entry:
        shell.run_dot(entry)
    else:
        shell.run_text(entry)
"""


def entries(typed: str) -> list[str]:
    """What the REPL would read at its prompts: a dot-command line, or lines up to a ``;``."""
    found, pending = [], []
    for line in typed.splitlines():
        if not pending and line.startswith("."):
            found.append(line)
            continue
        pending.append(line)
        if line.rstrip().endswith(";"):
            found.append("\n".join(pending))
            pending = []
    assert not pending, f"an unfinished statement: {pending}"
    return found


@pytest.mark.parametrize(
    ("page", "typed", "output"),
    repl_transcripts(),
    ids=lambda value: value if value.endswith(".md") else "",
)
def test_each_repl_session_prints_what_the_manual_shows(page, typed, output):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100", TERM="dumb")
    done = subprocess.run(
        [sys.executable, "-c", REPL_LOOP],
        input=json.dumps(entries(typed)),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    printed = done.stdout + done.stderr
    assert printed.strip() == output.strip(), f"{page}:\n{printed}"


def test_the_live_tutorials_producer_and_consumer_run_as_shown(tmp_path):
    """docs/tutorial/live-streams.md: its producer.py and its consumer, in their own registry."""
    page = (ROOT / "docs" / "tutorial" / "live-streams.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    producer = next(b for b in blocks if b.startswith("# producer.py"))
    consumer = blocks[blocks.index(producer) + 1]
    (tmp_path / "producer.py").write_text(producer, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MATCHSQL_RUNTIME_DIR=str(tmp_path / "runtime"))
    done = subprocess.run(
        [sys.executable, "-c", consumer],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    shown = re.search(r"print\(row\)\s+# (\(.*\)) \.\.\.", consumer).group(1)
    count = int(re.search(r"This run finds ([\d,]+) falls", page).group(1).replace(",", ""))
    assert rows[0] == shown and len(rows) == count


ARCHIVE_TUTORIAL = """
import json, subprocess, sys, time
import matchsql
from matchsql.cli.shell import Shell
setup, produce, after = json.load(sys.stdin)
con = matchsql.connect("live.duckdb")
shell = Shell(con)
for entry in setup:
    assert shell.run_text(entry), entry
subprocess.run([sys.executable, "-m", "matchsql", *produce], check=True, capture_output=True)
deadline = time.monotonic() + 120
while True:
    shown = con.sql("SHOW CONTINUOUS QUERIES")
    row = dict(zip(shown.columns, shown.fetchall()[0]))
    if row["state"] == "finished" or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(json.dumps({k: str(v) for k, v in row.items()}), flush=True)
for entry in after:
    shell.run_text(entry)
"""


def test_the_archive_tutorial_runs_as_shown(tmp_path):
    """docs/tutorial/archive-live.md, step by step: the stream, the continuous query, the
    producer, then what SHOW CONTINUOUS QUERIES, the counts and the history query show."""
    page = (ROOT / "docs" / "tutorial" / "archive-live.md").read_text(encoding="utf-8")
    typed = []
    for block in re.findall(r"```text\n(.*?)```", page, re.S):
        typed += [
            re.sub(r"^(matchsql| *\.\.\.)> ", "", line)
            for line in block.splitlines()
            if re.match(r"(matchsql| *\.\.\.)> ", line)
        ]
    steps = entries("\n".join(typed))
    show = steps.index("SHOW CONTINUOUS QUERIES;")
    produce = re.search(r"\.venv/bin/matchsql (produce .*)", page).group(1).split()
    env = dict(os.environ, PYTHONPATH=str(ROOT), MATCHSQL_RUNTIME_DIR=str(tmp_path / "runtime"))
    done = subprocess.run(
        [sys.executable, "-c", ARCHIVE_TUTORIAL],
        input=json.dumps([steps[:show], produce, steps[show + 1 :]]),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    first, printed = done.stdout.split("\n", 1)
    shown = json.loads(first)
    header, _, values = re.search(r"^(\| name .*)\n(\|---.*)\n(\| .*)$", page, re.M).groups()
    table = dict(zip(header.strip("|").split(" | "), values.strip("|").split(" | ")))
    for column, value in table.items():
        if column.strip() != "checkpoints":  # one a second: it depends on the run's time
            assert shown[column.strip()] == value.strip(), column
    counts = [int(n) for n in re.findall(r";\s+-- (\d+)", "\n".join(typed))]
    boxes = re.findall(r"│\s+(\d+) │", printed)
    assert [int(n) for n in boxes[: len(counts)]] == counts
    last = re.findall(r"```text\n(.*?)```", page, re.S)[-1]
    box = "\n".join(
        line for line in last.splitlines() if not re.match(r"(matchsql| *\.\.\.)> ", line)
    )
    assert printed.strip().endswith(box.strip())


def test_the_reference_stream_takes_the_reference_continuous_query(tmp_path, monkeypatch):
    """docs/reference/streams.md: the ``trades`` stream its first example creates is one
    its ``spikes`` continuous query runs over (a stream with an ``archive_filter`` was once
    shown before a continuous query that refuses one)."""
    import matchsql

    page = (ROOT / "docs" / "reference" / "streams.md").read_text(encoding="utf-8")
    blocks = [
        re.sub(r"--[^\n]*", "", block)  # comments hold ';' too
        for block in re.findall(r"```sql\n(.*?)```", page, re.S)
    ]
    stream = re.search(r"^CREATE STREAM .*? trades .*?;", blocks[0], re.S | re.M).group(0)
    query = next(
        re.search(r"^CREATE CONTINUOUS QUERY .*?;", block, re.S | re.M).group(0)
        for block in blocks
        if "CREATE CONTINUOUS QUERY" in block
    )
    query = query.replace(
        "PARTITION BY symbol ... )",
        (
            "PARTITION BY symbol ORDER BY ts MEASURES A.price AS price ONE ROW PER MATCH "
            "PATTERN (A) DEFINE A AS price > 100)"
        ),
    )
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))
    con = matchsql.connect(str(tmp_path / "live.duckdb"), demo=False)
    try:
        con.sql(stream.replace("[IF NOT EXISTS] ", ""))
        con.sql("CREATE TABLE spike_log (symbol VARCHAR, price DOUBLE)")
        con.sql(query.replace("[IF NOT EXISTS] ", ""))
        shown = con.sql("SHOW CONTINUOUS QUERIES")
        rows = [dict(zip(shown.columns, row)) for row in shown.fetchall()]
        assert [(row["name"], row["stream"], row["error"]) for row in rows] == [
            ("spikes", "trades", None)
        ]
        con.sql("DROP CONTINUOUS QUERY spikes")
    finally:
        con.close()
