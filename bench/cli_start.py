"""How long `cladebench --help`, a verb's help and a usage error take, against the interpreter doing nothing.

Each command runs as a subprocess (``python -m cladebench ...``), as a user runs it, several times; the median is
reported with the time above ``python -c pass`` (the baseline, measured in the same run) and what the command
imported of the heavy libraries (none of them is the goal). ``--src DIR`` also times another source tree's
``src/`` folder (e.g. the main checkout's) side by side, as the "before" of a change.

    python bench/cli_start.py [--repeats 5] [--src /path/to/other/checkout/src]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _args import positive_int

COMMANDS = (
    ["--help"], ["nosuch"], ["eval", "--help"], ["eval", "zeroshot", "--help"], ["eval", "crypticbio-common", "--help"],
    ["eval", "zeroshot"], ["suite", "--help"], ["embed", "--help"], ["load", "images", "--help"],
    ["build", "--help"], ["build", "inat-coobserved", "--help"], ["demo", "--help"], ["report", "--help"],
)
"""Help of the verbs the issue measured, a family's member's help, and two usage errors (an unknown verb, a missing
argument)."""
HEAVY = ("numpy", "pyarrow", "scipy", "lance", "torch", "open_clip")
"""The libraries a help or a usage error should not import (numpy is listed, not required)."""
_IMPORTED = ("import runpy, sys, json\nheavy = json.loads(sys.argv[2])\n"
             "sys.argv = ['cladebench', *json.loads(sys.argv[1])]\n"
             "try:\n    runpy.run_module('cladebench', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print(json.dumps([m for m in heavy if m in sys.modules]), file=sys.stderr)")


def seconds(argv: list[str], env: dict[str, str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def imported(command: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _IMPORTED, json.dumps(command), json.dumps(HEAVY)],
                          capture_output=True, text=True, check=False, env=env)
    return json.loads(done.stderr.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=positive_int, default=5, help="runs of each command; the median is shown")
    parser.add_argument("--src", type=Path, default=None, help="another source tree's src/ folder, timed beside")
    args = parser.parse_args()
    started = time.perf_counter()
    here = Path(__file__).resolve().parents[1] / "src"
    trees = {"this tree": here, **({"--src": args.src.resolve()} if args.src else {})}
    envs = {name: {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"} for name, src in trees.items()}
    print(f"cli_start: python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; median of {args.repeats} runs each")
    floor = seconds([sys.executable, "-c", "pass"], envs["this tree"], args.repeats)
    print(f"baseline `python -c pass`: {floor:.3f} s\n")
    header = "".join(f"{name + ' s':>12}{'above':>8}" for name in trees)
    print(f"{'command':<32}{header}  imported (this tree)")
    for command in COMMANDS:
        cells = ""
        for env in envs.values():
            took = seconds([sys.executable, "-m", "cladebench", *command], env, args.repeats)
            cells += f"{took:>12.3f}{took - floor:>8.3f}"
        heavy = imported(command, envs["this tree"])
        print(f"{' '.join(command):<32}{cells}  {', '.join(heavy) or '-'}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
