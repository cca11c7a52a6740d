"""Run CLI commands in a fresh Python and report, for each, its exit code and whether torch was imported by then.

The tests that a mistake is refused before any model loads name a real (tiny) model in every command: had it
loaded, ``torch`` would be in ``sys.modules`` of that process. A fresh interpreter is what makes the check mean
something, since the test process has long imported torch. ``unimportable`` packages are refused in that
interpreter, as where they are not installed (a research install has no pandas: only the test references need it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, sys


class Unimportable:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in json.loads(sys.argv[2]):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, Unimportable())
from cladebench.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    results.append([code, "torch" in sys.modules])
print(json.dumps(results))
"""


def run_before_model(argvs: list[list[str]], unimportable: tuple[str, ...] = ()
                     ) -> tuple[list[tuple[int, bool]], list[str]]:
    """(exit code, torch imported) per command, and the non-blank stderr lines of the whole run (offline)."""
    result = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(argvs), json.dumps(unimportable)],
                            capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    outcomes = [tuple(o) for o in json.loads(result.stdout.strip().splitlines()[-1])]
    return outcomes, [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[misc]
