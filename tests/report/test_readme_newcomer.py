"""The README's words a newcomer needs after the demo: that `--model demo` works offline, and what the pooled
summary run beside the per-group runs is (said as the report says it)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _sentences() -> list[str]:
    return [" ".join(s.split()) for s in re.split(r"(?<=\.)\s", README.read_text())]


def test_the_readme_says_the_demo_model_works_offline() -> None:
    assert any("`--model demo`" in s and "offline" in s for s in _sentences())


def test_the_readme_says_what_a_pooled_summary_is() -> None:
    from cladebench.report.runs import POOLED_SUMMARY

    said = next(s for s in _sentences() if s.startswith("A \"pooled (summary)\" run"))
    assert "one benchmark" in said and "not a benchmark of its own" in said
    assert "one benchmark" in POOLED_SUMMARY and "not a benchmark of its own" in POOLED_SUMMARY
