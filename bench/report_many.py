"""How the time of ``cladebench report`` grows with the number of runs: bounded work per run, or worse.

The runs are real run records: a synthetic world (``--rows`` photos in ``--groups``-odd challenge groups) embedded
by two tiny CLIPs, and ``eval zeroshot`` grouped by challenge group with each model and two name styles (four
evaluations); the N run folders of a report are copies of those four, round-robin (each folder its own name, so
each run its own label). A report of N runs therefore has everything a real one has (leaderboard, per-group and
per-rank charts, calibration, confusions, galleries with photos, provenance), with N x the runs.

For each N of ``--sizes`` it writes the HTML report of the first N runs and prints the seconds, the seconds per
run and the ratio to the first size's per-run time (1.0: the work per run does not grow with N; N / first: it
grows linearly, quadratic in all). The first size is the baseline, in the same process.

    .venv/bin/python bench/report_many.py [--sizes 5 20 50] [--rows 240] [--seed 0] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _args import positive_int


def build_runs(root: Path, count: int, rows: int, seed: int) -> list[Path]:
    """``count`` run folders under ``root``: copies of four real zero-shot runs (two tiny models x two name
    styles, grouped by challenge group)."""
    from cladebench import store
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.evaluate.configs import eval_config
    from cladebench.evaluate.run import run_eval
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world

    world = make_world(WorldConfig(seed=seed, names="generated", branching=(1, 1, 3, 1, 2, 2, 2)))
    dataset = root / "world.lance"
    store.write_dataset(world.to_table(rows, seed=seed + 1, image_format="jpeg"), dataset)
    models = {}
    for name, model_seed in (("a", seed + 4), ("b", seed + 5)):
        models[name] = "local-dir:" + str(write_tiny_model(root / f"tiny-{name}", seed=model_seed))
        embed_dataset(EmbedConfig(dataset=str(dataset), model=models[name], column=f"emb_{name}", workers=0,
                                  device="cpu", progress=False))
    originals = []
    for name, model in models.items():
        for style in ("taxon", "sci"):
            config = eval_config(dataset=str(dataset), model=model, out=root / "runs" / f"{name}-{style}",
                                 device="cpu", name_style=style)
            originals.append(run_eval(config)[1].parent)
    out = []
    for i in range(count):
        target = root / "copies" / f"run-{i:03d}"
        shutil.copytree(originals[i % len(originals)], target)
        out.append(target)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[5, 20, 50],
                        help="numbers of runs per report (default 5 20 50); the first is the baseline")
    parser.add_argument("--rows", type=positive_int, default=240, help="photos of the world (default 240)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None, help="where the runs are written (default: a temporary folder)")
    args = parser.parse_args(argv)

    from cladebench.report import write_report

    print(f"report_many: python {platform.python_version()}, {os.cpu_count()} CPUs (load average "
          f"{os.getloadavg()[0]:.1f})")
    started = time.perf_counter()
    if args.workdir is not None:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        root = Path(folder)
        t = time.perf_counter()
        runs = build_runs(root, max(args.sizes), args.rows, args.seed)
        print(f"runs: {max(args.sizes)} run folders (copies of 4 zero-shot runs on {args.rows} photos) in "
              f"{time.perf_counter() - t:.1f} s (not timed)\n")
        print(f"{'runs':>6}{'seconds':>10}{'s per run':>11}{'per run / first':>17}{'size':>12}")
        first = None
        for size in args.sizes:
            began = time.perf_counter()
            out = write_report(runs[:size], root / f"report-{size}.html")
            seconds = time.perf_counter() - began
            per_run = seconds / size
            first = first or per_run
            print(f"{size:>6}{seconds:>10.1f}{per_run:>11.2f}{per_run / first:>17.2f}"
                  f"{out.stat().st_size / 2**20:>10.1f} MB", flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
