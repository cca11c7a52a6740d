"""How much sooner `cladebench eval` refuses a mistake it can find without a model than a run that loads the model.

Every case is a pair of `cladebench` commands on the same dataset, each run as its own subprocess (as a user runs
them), timed wall-clock from start to exit: the command with the mistake (an unknown column in --breakdown, a bad
--rank, a filter that does not parse, an option out of range, a --labels file that cannot be read, a missing
dataset ...) and the same command with a valid value, which loads the model and evaluates. The ratio is
valid / failing: how many times a user waits longer when the mistake is found after the model loads than before.
Each failing command must exit with its documented code and one line on stderr, and each valid one with 0;
otherwise the script says so and exits 1.

The data is built here: a tiny random CLIP (``cladebench.models.tiny``) or ``--model``, and a dataset of
``--rows`` rows with seven ranks, places and dates, a partition column, a list column of look-alikes, a
seen_in_training list and vectors in the model's column (random: the numbers of the evaluation are not the
point). With the tiny model the model's own load is short, so the valid run is mostly the import of torch and
open_clip and the evaluation itself: the ratio with a real model (``--model bioclip`` where its weights are
cached) is larger. The time of ``cladebench eval zeroshot --help`` is printed first: the floor of any command
(the interpreter and the CLI's imports), under which no refusal can go.

    .venv/bin/python bench/precheck.py [--rows 2000] [--repeats 3] [--model NAME] [--seed 0] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from cladebench import store

CLI = [sys.executable, "-m", "cladebench"]


def build_dataset(path: Path, rows: int, model: str, dim: int, seed: int) -> None:
    """Seven ranks over 40 species in 8 genera, two challenge groups, look-alike lists and random vectors."""
    rng = np.random.default_rng(seed)
    species_index = rng.integers(0, 40, size=rows)
    genus = [f"Genus{i // 5}" for i in species_index]
    table = pa.table({
        "uuid": [f"u{i:07d}" for i in range(rows)],
        "image": pa.array([b"x"] * rows, pa.large_binary()),
        "kingdom": ["Animalia"] * rows, "phylum": ["Chordata"] * rows, "class": ["Aves"] * rows,
        "order": [f"Order{i // 20}" for i in species_index], "family": [f"Family{i // 10}" for i in species_index],
        "genus": genus, "species": [f"{g} epithet{i % 5}" for g, i in zip(genus, species_index, strict=True)],
        "challenge_group": ["birds" if i % 2 else "more birds" for i in species_index],
        "cryptic_group": [[f"{g} epithet{j}" for j in range(5)] for g in genus],
        "seen_in_training": [[] if i % 3 else ["bioclip"] for i in range(rows)],
        # Each genus lives in its own region and season, so the geo task's prior has something to fit.
        "latitude": [float(i // 5 * 10 - 40 + rng.normal()) for i in species_index],
        "longitude": [float(i // 5 * 20 - 80 + rng.normal()) for i in species_index],
        "observed_on": pa.array([18262 + int(i // 5 * 40 + rng.integers(0, 30)) for i in species_index],
                                pa.int32()).cast(pa.date32()),  # days since 1970: from 2020-01-01
    })
    field = store.embedding_field("emb_bench", dim, {"model": model})
    vectors = rng.normal(size=(rows, dim)).astype(np.float32)
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim))
    store.write_dataset(table, path)


def cases(dataset: str, workdir: Path) -> list[tuple[str, list[str], list[str], int]]:
    """(name, failing options, valid options, the failing command's exit code)."""
    labels = workdir / "labels.csv"
    labels.write_text("genus,species\n" + "".join(f"Genus{s // 5},Genus{s // 5} epithet{s % 5}\n" for s in range(40)))
    not_utf8 = workdir / "labels-latin1.txt"
    not_utf8.write_bytes("Genus0 épithète\n".encode("latin-1"))
    missing = str(workdir / "missing.lance")
    return [
        ("--breakdown unknown column", ["--breakdown", "nope"], ["--breakdown", "order"], 2),
        ("--group-by unknown column", ["--group-by", "nope"], ["--group-by", "order"], 2),
        ("--column unknown column", ["--column", "emb_nope"], ["--column", "emb_bench"], 4),
        ("--candidates unknown column", ["--candidates", "nope"], ["--candidates", "cryptic_group"], 4),
        ("--candidates not a list", ["--candidates", "genus"], ["--candidates", "cryptic_group"], 2),
        ("--rank misspelt", ["--rank", "specis"], ["--rank", "genus"], 2),
        ("--where syntax", ["--where", "species = = 'x'"], ["--where", "order = 'Order0'"], 2),
        ("--where ';'", ["--where", "1=1; DROP TABLE x"], ["--where", "order = 'Order0'"], 2),
        ("--where unbalanced quote", ["--where", "species = 'x"], ["--where", "order = 'Order0'"], 2),
        ("--where unknown column", ["--where", "nope = 1"], ["--where", "order = 'Order0'"], 2),
        ("--logit-scale 0", ["--logit-scale", "0"], ["--logit-scale", "100"], 2),
        ("--logit-scale -1", ["--logit-scale", "-1"], ["--logit-scale", "100"], 2),
        ("--logit-scale nan", ["--logit-scale", "nan"], ["--logit-scale", "100"], 2),
        ("--logit-scale inf", ["--logit-scale", "inf"], ["--logit-scale", "100"], 2),
        ("--templates unknown", ["--templates", "nosuch"], ["--templates", "photo"], 2),
        ("--within not RANK=NAME", ["--within", "Aves"], ["--within", "class=Aves"], 2),
        ("--labels not UTF-8", ["--labels", str(not_utf8)], ["--labels", str(labels)], 1),
        ("--labels missing", ["--labels", str(workdir / "none.csv")], ["--labels", str(labels)], 1),
        ("geo --prior-cell-km 0", ["--task-geo", "--prior-cell-km", "0"], ["--task-geo", "--prior-cell-km", "200"],
         2),
        ("geo --prior-season-bins huge", ["--task-geo", "--prior-season-bins", "99999999999"],
         ["--task-geo", "--prior-season-bins", "4"], 2),
        ("geo --prior-split wrong type", ["--task-geo", "--prior-split", "a", "b", "c"],
         ["--task-geo", "--prior-split", "0.5", "0.25", "0.25"], 2),
        ("missing dataset", ["--dataset", missing], [], 3),
    ]


def command(dataset: str, model: str, out: Path, options: list[str]) -> list[str]:
    task, options = ("geo", options[1:]) if options[:1] == ["--task-geo"] else ("zeroshot", options)
    if options[:1] == ["--dataset"]:
        dataset, options = options[1], options[2:]
    return [*CLI, "eval", task, dataset, "--model", model, "--out", str(out), "--device", "cpu", *options]


def timed_run(argv: list[str]) -> tuple[float, int, list[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - start
    return seconds, done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command; the median is reported")
    parser.add_argument("--model", default=None, help="a model name (default: a tiny random CLIP written here)")
    parser.add_argument("--dim", type=int, default=None, help="the model's embedding width (with --model)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    import lance
    import open_clip
    import torch

    print(f"precheck: python {platform.python_version()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"open_clip {open_clip.__version__}, pylance {lance.__version__}")
    began = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cladebench-precheck-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.model is None:
            from cladebench.models.tiny import write_tiny_model

            model, dim = "local-dir:" + str(write_tiny_model(workdir / "tiny-clip", seed=args.seed)), 32
        else:
            if args.dim is None:
                parser.error("--model needs --dim (the width of its image embeddings)")
            model, dim = args.model, args.dim
        dataset = workdir / "bench.lance"
        if not dataset.exists():
            build_dataset(dataset, args.rows, model, dim, args.seed)
        print(f"model {model}; dataset {args.rows:,} rows; median of {args.repeats} run(s) per command")
        floor = statistics.median(timed_run([*CLI, "eval", "zeroshot", "--help"])[0] for _ in range(args.repeats))
        print(f"floor: `cladebench eval zeroshot --help` takes {floor:.2f} s\n")
        print(f"{'case':<32} {'exit':>4} {'failing s':>10} {'valid s':>8} {'ratio':>7}")
        ratios, problems = [], []
        for name, bad, good, code in cases(str(dataset), workdir):
            fail_times, valid_times = [], []
            for repeat in range(args.repeats):
                seconds, got, err = timed_run(command(str(dataset), model, workdir / "never", bad))
                fail_times.append(seconds)
                if got != code or len(err) != 1:
                    problems.append(f"{name}: exit {got} (want {code}), {len(err)} stderr line(s): {err[-1:]}")
                out = workdir / f"run-{len(ratios)}-{repeat}"
                seconds, got, err = timed_run(command(str(dataset), model, out, good))
                valid_times.append(seconds)
                shutil.rmtree(out, ignore_errors=True)
                if got != 0:
                    problems.append(f"{name}: the valid command exited {got}: {err[-1:]}")
            failing, valid = statistics.median(fail_times), statistics.median(valid_times)
            ratios.append(valid / failing)
            print(f"{name:<32} {code:>4} {failing:>10.2f} {valid:>8.2f} {valid / failing:>6.1f}x")
        print(f"\nratio valid / failing: median {statistics.median(ratios):.1f}x, min {min(ratios):.1f}x, "
              f"max {max(ratios):.1f}x over {len(ratios)} cases")
        for problem in problems:
            print(f"PROBLEM {problem}")
        print(f"total {time.perf_counter() - began:.0f} s")
        return 1 if problems else 0
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
