"""Running the demo: its steps registered in order, the output folder prepared, every step run, the summary written.

Why a module of its own: the command line builds ``cladebench demo --help`` from :mod:`.config`, which imports the
package; the steps (pyarrow, Lance, the synthetic world) are imported when the demo runs.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench import __version__
from cladebench.demo.steps import DEMO_STEPS, DemoContext, say

if TYPE_CHECKING:
    from cladebench.demo.config import DemoConfig

STEP_MODULES = ("suite", "finegrained", "other_tasks", "summary")
"""The modules whose steps the demo runs, in run order: each registers its steps in :data:`DEMO_STEPS` when it is
imported, so they are imported here one by one, in this order (an import sorter would reorder a list of imports)."""
for _module in STEP_MODULES:
    importlib.import_module(f"{__package__}.{_module}")
# A step module imported on its own before this one (a test, a script) registered its steps first: the run order is
# STEP_MODULES' whatever the import order, each module's steps in the order it registers them.
_ORDER = {f"{__package__}.{module}": position for position, module in enumerate(STEP_MODULES)}
for _name, _ in sorted(DEMO_STEPS.items(), key=lambda item: _ORDER.get(item[1].__module__, len(_ORDER))):
    DEMO_STEPS[_name] = DEMO_STEPS.pop(_name)

WRITER = "demo"
"""The demo folder's marker names this writer (:mod:`cladebench.curate.staging`)."""


def _is_unmarked_demo(folder: Path) -> bool:
    """A demo folder written before output markers: its summary.json is a demo's."""
    try:
        written = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(written, dict) and "cladebench_version" in written and "steps" in written


def run_demo(config: DemoConfig) -> dict[str, object]:
    """Build the sample suite under ``config.out``, run every step, write ``summary.json``, print a summary."""
    from cladebench.config import at_least
    from cladebench.curate.staging import OutputTarget, prepare_in_place
    from cladebench.paths import atomic_write
    from cladebench.synthetic import WorldConfig, make_world

    # Both suites need rows (an empty one fails at its first write): refused before the folder is made.
    at_least("--images", config.images, 1)
    at_least("--pairs", config.pairs, 1)

    # Written in place (its run records name its datasets by path), marked first. A previous demo, finished or
    # killed midway, is replaced without being asked (the README's command must work when run again); a folder
    # that is not a demo's is never touched, whatever --overwrite says.
    out_dir = prepare_in_place(OutputTarget(Path(config.out), writer=WRITER, overwrite=True, overwrite_option="",
                                            legacy=_is_unmarked_demo))
    started = time.perf_counter()
    world = make_world(WorldConfig(seed=config.seed))
    ctx = DemoContext(config=config, world=world, out_dir=out_dir)
    ctx.summary = {
        "cladebench_version": __version__,
        "command": " ".join(["cladebench", *sys.argv[1:]]) if sys.argv else "cladebench demo",
        "seed": config.seed,
        "world": world.provenance(),
        "steps": {},
    }
    for name, step in DEMO_STEPS.items():
        say(f"[demo] {name} ...")
        step_started = time.perf_counter()
        result = step(ctx)
        result["seconds"] = round(time.perf_counter() - step_started, 2)
        ctx.summary["steps"][name] = result
    ctx.summary["seconds"] = round(time.perf_counter() - started, 2)
    atomic_write(out_dir / "summary.json", json.dumps(ctx.summary, indent=2, default=str) + "\n")
    from cladebench.demo.summary import summary_lines

    print("\n".join(summary_lines(ctx)))
    return ctx.summary



