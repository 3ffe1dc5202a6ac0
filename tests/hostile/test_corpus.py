"""The hostile corpus, CI-sized: every family plus seeded mutations, each statement
in a capped child process; anything but rows or a matchsql.Error within 10 s fails.

The documented large run is ``python -m tests.hostile.run --count 2000``.
"""

from __future__ import annotations

from tests.hostile.corpus import KNOWN_OPEN, generate
from tests.hostile.run import run_corpus

CI_COUNT = 300


def test_hostile_corpus_gives_rows_or_clean_errors() -> None:
    cases = [case for case in generate(CI_COUNT) if case.sql not in KNOWN_OPEN]
    report = run_corpus(cases, timeout=10.0, memory=2 << 30, batch=150, jobs=2)
    assert len(report.outcomes) == len(cases)
    bad = [f"[{o.kind}] {o.case.family}: {o.detail[:200]} -- {o.case.sql[:200]!r}"
           for o in report.bad]
    assert not bad, report.summary() + "\n" + "\n".join(bad)
    assert report.peak_rss_mib < 2048
