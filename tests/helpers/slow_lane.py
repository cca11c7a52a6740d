"""Which tests the fast lane (``pytest -m "not slow"``) leaves out: those listed in ``tests/slow_tests.txt``.

Why a list and not only decorators: a test is slow by what it costs on the machine that runs it (a module's
expensive fixture is paid by whichever of its tests runs first), which is measured, not seen in its text. The
list is made from a timed run and kept beside the tests; ``@pytest.mark.slow`` in a test module still works.
Regenerate it on an idle 2-core machine:

    pytest -p no:cacheprovider -n 2 -m "not slow" --durations=0 > durations.txt
    python tests/helpers/slow_lane.py durations.txt >> tests/slow_tests.txt   (then sort -u)
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

SLOW_LIST = Path(__file__).resolve().parents[1] / "slow_tests.txt"
THRESHOLD_S = 0.5
"""A test function whose runs take this long on average (setup, call and teardown) is slow."""


def slow_ids(path: Path = SLOW_LIST) -> frozenset[str]:
    """The listed node ids: a test module (``tests/x/test_y.py``) or a test function without its parameters."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return frozenset(line for line in lines if line)


def is_listed(nodeid: str, listed: frozenset[str]) -> bool:
    function = nodeid.split("[", 1)[0]
    return function in listed or function.split("::", 1)[0] in listed


def slow_from_durations(text: str, threshold_s: float = THRESHOLD_S) -> list[str]:
    """Test functions of a ``--durations=0`` report whose runs average at least ``threshold_s``."""
    total: dict[str, float] = defaultdict(float)
    runs: dict[str, set[str]] = defaultdict(set)
    for line in text.splitlines():
        match = re.match(r"([\d.]+)s (?:setup|call|teardown)\s+(\S+)", line)
        if match:
            function = match.group(2).split("[", 1)[0]
            total[function] += float(match.group(1))
            runs[function].add(match.group(2))
    return sorted(f for f in total if total[f] / len(runs[f]) >= threshold_s)


if __name__ == "__main__":
    print("\n".join(slow_from_durations(Path(sys.argv[1]).read_text(encoding="utf-8"))))
