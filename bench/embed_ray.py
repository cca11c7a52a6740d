"""Rows/s of ``embed --ray`` on a local Ray cluster against the single-process ``embed``, on the same data.

Both runs embed a fresh copy of one dataset (synthetic 500 px photos, half JPEG, half WebP, written in
fragments of ``--fragment-rows``) with the same model, batch size and device. The single-process run is the
baseline measured in the same run: ``embed`` with its own split of the cores between decoding workers and
the model. The Ray run uses a local cluster of ``--ray-cpus`` CPUs started before the clock starts (its
start-up is reported on its own line), with one actor per CPU.

What it answers: the Ray path's overhead on one machine (actor start-up, model loads in every actor,
fragment hand-off, the commit), as a ratio at several sizes; at small sizes that fixed cost dominates.
It does not answer how Ray scales over many machines, which a 2-core machine cannot show.

    .venv/bin/python bench/embed_ray.py [--sizes 256 1024 4096] [--fragment-rows 256] [--ray-cpus 2]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import time
from pathlib import Path

from _setup import add_seed_and_workdir, build_dataset, environment, work_folder
from cladebench import store
from cladebench.embed import EmbedConfig, embed_dataset


def copy_rows(source: Path, target: Path, rows: int, fragment_rows: int) -> None:
    table = store.read(store.open_dataset(source), limit=rows)
    store.write_dataset(table, target, max_rows_per_file=fragment_rows)


def run(config: EmbedConfig) -> tuple[float, int]:
    started = time.perf_counter()
    summary = embed_dataset(config)
    seconds = time.perf_counter() - started
    assert summary.valid + summary.failed == summary.rows and summary.encoded_now == summary.rows, summary
    return seconds, summary.runner.get("actors", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--fragment-rows", type=int, default=256, help="rows per Lance fragment (Ray's unit)")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray cluster (one actor each)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default=None, help="model id (default: the tiny test CLIP, decode-bound)")
    add_seed_and_workdir(parser)
    args = parser.parse_args()

    import ray

    from cladebench.models.tiny import tiny_model_id

    print(environment("embed_ray", ("ray", "pylance", "torch", "open_clip_torch")))
    with work_folder(args.workdir) as work:
        source = work / "images.lance"
        n = max(args.sizes)
        if not source.exists():
            started = time.perf_counter()
            build_dataset(source, n, args.seed)
            print(f"dataset: {n} synthetic 500 px images in {time.perf_counter() - started:.1f} s")
        model = args.model or tiny_model_id(work / "models")

        started = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        print(f"local Ray cluster of {args.ray_cpus} CPUs started in {time.perf_counter() - started:.1f} s "
              "(not counted below)")
        rows = []
        for size in args.sizes:
            timings = {}
            for kind in ("single", "ray"):
                target = work / f"{kind}-{size}.lance"
                shutil.rmtree(target, ignore_errors=True)
                copy_rows(source, target, size, args.fragment_rows)
                config = EmbedConfig(dataset=str(target), model=model, column="emb_bench",
                                     batch_size=args.batch_size, device="cpu", progress=False,
                                     ray="default" if kind == "ray" else None, ray_cpus_per_actor=1)
                timings[kind] = run(config)
                shutil.rmtree(target, ignore_errors=True)
            (single, _), (on_ray, actors) = timings["single"], timings["ray"]
            fragments = -(-size // args.fragment_rows)
            rows.append((size, fragments, actors, size / single, size / on_ray, single, on_ray))
            print(f"{size:>6} rows {fragments:>3} fragments  single {size / single:8.1f} rows/s ({single:6.1f} s)  "
                  f"ray x{actors} {size / on_ray:8.1f} rows/s ({on_ray:6.1f} s)  ray/single {single / on_ray:5.2f}",
                  flush=True)
        ray.shutdown()
        print()
        print("| rows | fragments | Ray actors | single rows/s | Ray rows/s | Ray / single | single s | Ray s |")
        print("|---|---|---|---|---|---|---|---|")
        for size, fragments, actors, single_rate, ray_rate, single, on_ray in rows:
            print(f"| {size} | {fragments} | {actors} | {single_rate:.1f} | {ray_rate:.1f} "
                  f"| {ray_rate / single_rate:.2f} | {single:.1f} | {on_ray:.1f} |")
        # Between two sizes the fixed costs cancel: what each path adds per extra row is its steady rate.
        print()
        print("| from rows | to rows | single marginal rows/s | Ray marginal rows/s | Ray / single "
              "| Ray fixed cost s |")
        print("|---|---|---|---|---|---|")
        for (a, _, _, _, _, single_a, ray_a), (b, _, _, _, _, single_b, ray_b) in itertools.pairwise(rows):
            single_rate, ray_rate = (b - a) / (single_b - single_a), (b - a) / (ray_b - ray_a)
            fixed = (ray_b - b / ray_rate) - (single_b - b / single_rate)
            print(f"| {a} | {b} | {single_rate:.1f} | {ray_rate:.1f} | {ray_rate / single_rate:.2f} | {fixed:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
