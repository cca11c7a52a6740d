"""The iNat Co-Observed builder on synthetic iNat open-data exports of growing size: time, throughput, peak memory.

What it measures: :func:`cladebench.benchmarks.coobserved.builder.build.build_coobserved` (DuckDB, out of core, with a
``memory_limit``) over exports written by :func:`cladebench.synthetic.inat_export.write_export` with ``--sizes``
photo rows (default 1M and 10M), each generated once into the work directory. Every step runs in a
child process of its own, so each peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that child;
DuckDB's allocations are in it) belongs to that step alone:

- ``generate``: writing the export (streamed ``--chunk-rows`` observations at a time);
- ``scan``: the baseline, DuckDB reading photos.csv and observations.csv once as text with the
  builder's reader options, every field parsed, nothing else: the floor any builder pays;
- ``build``: the whole build (four files read, every row checked, sampled, written).

Each export is built once per ``--memory-limit`` (DuckDB's limit; it spills past it). The script prints,
per size and limit, the wall times, the ratio build / scan, photo rows per second and the peak RSS of
each step, then the growth from the smallest to the largest size at each limit, and whether every
build of one export gave the same rows (the same fingerprint) whatever the limit. With memory
bounded, the build's peak RSS follows the limit, not the number of rows.

With ``--baseline-src DIR`` each export is also built by the cladebench of another source tree (an older
commit's ``src/``), right after this one's build under the same limit: the script prints the speed-up and whether
both builds wrote the same rows in the same order (the same uuid fingerprint, the same SHA-256 of every row of
``data/coobserved.parquet`` and ``dropped.parquet``) and the same counts. Every build also reports the wall time
of each stage (``Stages`` method), the profile of where the time goes.

    .venv/bin/python bench/coobserved_builder.py [--sizes 1000000 10000000] [--memory-limit 256MB 1GB]
                                                 [--threads N] [--seed 0] [--workdir DIR] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1024 * 1024


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


def child_generate(export_dir: str, n_photos: int, seed: int, chunk_rows: int) -> dict:
    from cladebench.synthetic.inat_export import ExportConfig, write_export, write_manifest

    started = time.perf_counter()
    config = ExportConfig(n_photos=n_photos, seed=seed, n_coobserved=max(60, n_photos // 1000),
                          chunk_rows=chunk_rows)
    manifest = write_export(export_dir, config)
    write_manifest(manifest, Path(export_dir) / "manifest.json")
    return {"wall_s": time.perf_counter() - started, "peak_rss_mb": _peak_rss_mb(), "rows": manifest.rows,
            "bytes": sum(p.stat().st_size for p in manifest.files.values()), "eligible": len(manifest.eligible)}


def child_scan(export_dir: str, memory_limit: str, threads: int | None) -> dict:
    import duckdb

    from cladebench.benchmarks.coobserved.builder.reading import export_files

    files = export_files(Path(export_dir))
    con = duckdb.connect()
    con.sql(f"SET memory_limit = '{memory_limit}'")
    if threads:
        con.sql(f"SET threads = {threads}")
    started = time.perf_counter()
    # max(length(...)) of every column, so that every field is parsed (a bare count(*) may skip that).
    rows = {t: con.sql(f"SELECT count(*), max(length(COLUMNS(*))) FROM {files[t].scan(record_rejects=False)}"
                       ).fetchall()[0][0] for t in ("photos", "observations")}
    return {"wall_s": time.perf_counter() - started, "peak_rss_mb": _peak_rss_mb(), "rows": rows}


STAGES = ("photo_ids", "photos", "candidates", "observations", "taxa", "lineages", "observers", "licenses",
          "evaluate", "outcomes", "eligible", "rows", "dropped")
"""Methods of ``Stages`` timed in a build (those a source tree lacks are skipped: an older one may not have them)."""


def _digest(path: Path) -> str:
    import hashlib

    import pyarrow.parquet as pq

    text = json.dumps(pq.read_table(path).to_pylist(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def child_build(export_dir: str, out: str, memory_limit: str, threads: int | None, seed: int) -> dict:
    import functools

    from cladebench.benchmarks.coobserved.builder import stages
    from cladebench.benchmarks.coobserved.builder.build import build_coobserved
    from cladebench.benchmarks.coobserved.builder.config import DATA_FILE, CoObservedBuildConfig

    seconds: dict[str, float] = {}
    for name in STAGES:  # each stage's wall time, the profile of the build
        method = getattr(stages.Stages, name, None)
        if method is None:
            continue

        @functools.wraps(method)
        def timed(self, *args, _method=method, _name=name, **kwargs):
            began = time.perf_counter()
            try:
                return _method(self, *args, **kwargs)
            finally:
                seconds[_name] = seconds.get(_name, 0.0) + time.perf_counter() - began

        setattr(stages.Stages, name, timed)
    before = _peak_rss_mb()
    started = time.perf_counter()
    summary = build_coobserved(CoObservedBuildConfig(Path(export_dir), Path(out), seed=seed, overwrite=True),
                               memory_limit=memory_limit, threads=threads)
    return {"wall_s": time.perf_counter() - started, "peak_rss_mb": _peak_rss_mb(), "rss_after_imports_mb": before,
            "rows": summary.rows, "eligible": summary.eligible, "photo_ids": summary.photo_ids,
            "fingerprint": summary.fingerprint, "photo_rows": summary.files["photos"]["rows"],
            "data_sha256": _digest(Path(out) / DATA_FILE), "dropped_sha256": _digest(Path(out) / "dropped.parquet"),
            "summary": {k: v for k, v in summary.as_dict().items()
                        if k in ("row_issues", "photo_outcomes", "notes", "eligible_per_rank", "kept_per_rank")},
            "stage_s": seconds, "source": stages.__file__}


CHILDREN = {"generate": child_generate, "scan": child_scan, "build": child_build}


def run_child(step: str, *args: object, src: Path | None = None) -> dict:
    """One step in a fresh interpreter; its last stdout line is the step's JSON. ``src``: import cladebench from
    that source tree instead (``--baseline-src``)."""
    command = [sys.executable, __file__, "--child", step, json.dumps([*args])]
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{step} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _versions() -> str:
    import duckdb
    import pyarrow

    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs, duckdb {duckdb.__version__}, "
            f"pyarrow {pyarrow.__version__}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000], help="photo rows per export")
    parser.add_argument("--memory-limit", nargs="+", default=["256MB", "1GB"],
                        help="DuckDB memory_limit of the builds (one build per value) and of the scan (the last)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: one per core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="observations generated at a time")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the exports here (default: a temp dir)")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="also build each export with the cladebench of this source tree (its src/ folder, e.g. "
                             "from git archive of an older commit), for the speed-up and the same-output check")
    parser.add_argument("--child", nargs=2, metavar=("STEP", "ARGS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        step, child_args = args.child
        print(json.dumps(CHILDREN[step](*json.loads(child_args))))
        return 0

    started = time.perf_counter()
    print(f"coobserved_builder: {_versions()}, memory limits {', '.join(args.memory_limit)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-coobserved-"))
    results = []
    try:
        for size in sorted(args.sizes):
            export_dir = workdir / f"export-{size}"
            manifest = export_dir / "manifest.json"
            if manifest.is_file():
                generated = {"wall_s": float("nan"), "peak_rss_mb": float("nan"),
                             "bytes": sum(p.stat().st_size for p in export_dir.glob("*.csv*"))}
            else:
                generated = run_child("generate", str(export_dir), size, args.seed, args.chunk_rows)
            scanned = run_child("scan", str(export_dir), args.memory_limit[-1], args.threads)
            for limit in args.memory_limit:
                build_args = (str(export_dir), str(workdir / f"out-{size}"), limit, args.threads, args.seed)
                built = run_child("build", *build_args)
                baseline = None if args.baseline_src is None else run_child("build", *build_args,
                                                                            src=args.baseline_src)
                results.append((size, limit, generated, scanned, built, baseline))
                print(f"  {size:,} photo rows, memory_limit {limit}: generate {generated['wall_s']:.1f} s, "
                      f"scan {scanned['wall_s']:.1f} s, build {built['wall_s']:.1f} s "
                      f"({built['rows']:,} of {built['eligible']:,} eligible kept)"
                      + ("" if baseline is None else f", baseline build {baseline['wall_s']:.1f} s"), flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    header = (f"{'photo rows':>12} {'export MB':>10} {'gen s':>7} {'gen MB':>7} {'scan s':>7} {'limit':>6} "
              f"{'build s':>8} {'build/scan':>10} {'rows/s':>10} {'build MB':>9} {'kept':>6}")
    print("\n" + header + "\n" + "-" * len(header))
    for size, limit, generated, scanned, built, _ in results:
        print(f"{size:>12,} {generated['bytes'] / MB:>10,.0f} {generated['wall_s']:>7.1f} "
              f"{generated['peak_rss_mb']:>7.0f} {scanned['wall_s']:>7.1f} {limit:>6} {built['wall_s']:>8.1f} "
              f"{built['wall_s'] / scanned['wall_s']:>10.1f} {size / built['wall_s']:>10,.0f} "
              f"{built['peak_rss_mb']:>9.0f} {built['rows']:>6,}")
    sizes = sorted({r[0] for r in results})
    if len(sizes) > 1:
        print()
        for limit in args.memory_limit:
            first, last = (next(r[4] for r in results if r[0] == s and r[1] == limit) for s in (sizes[0], sizes[-1]))
            growth = last["peak_rss_mb"] / first["peak_rss_mb"]
            print(f"memory_limit {limit}: {sizes[-1] / sizes[0]:.0f}x the rows, build time "
                  f"x{last['wall_s'] / first['wall_s']:.1f}, build peak RSS x{growth:.2f}"
                  f" ({first['peak_rss_mb']:.0f} -> {last['peak_rss_mb']:.0f} MB; "
                  f"{first['rss_after_imports_mb']:.0f} MB of it is the interpreter and imports)")
    same = all(len({(r[4]["fingerprint"], r[4]["data_sha256"]) for r in results if r[0] == s}) == 1 for s in sizes)
    print(f"same rows and fingerprint under every memory limit: {same}")
    print("\nwhere a build's time goes (seconds per stage; scan = reading photos.csv and observations.csv once, "
          "as text, every field parsed):")
    for size, limit, _, scanned, built, baseline in results:
        for label, run in (("build", built), ("baseline", baseline)):
            if run is None:
                continue
            stages = ", ".join(f"{k} {v:.1f}" for k, v in run["stage_s"].items() if v >= 0.05)
            print(f"  {size:,} rows, {limit}, {label}: {stages}; scan {scanned['wall_s']:.1f}")
    if args.baseline_src is not None:
        print(f"\nagainst the builder in {args.baseline_src} (run in the same session, alternating):")
        for size, limit, _, _, built, baseline in results:
            keys = ("fingerprint", "data_sha256", "dropped_sha256", "summary")
            identical = all(built[k] == baseline[k] for k in keys)
            print(f"  {size:,} rows, {limit}: {baseline['wall_s']:.1f} s -> {built['wall_s']:.1f} s, speed-up "
                  f"x{baseline['wall_s'] / built['wall_s']:.2f}, {size / built['wall_s']:,.0f} vs "
                  f"{size / baseline['wall_s']:,.0f} photo rows/s, peak RSS {baseline['peak_rss_mb']:.0f} -> "
                  f"{built['peak_rss_mb']:.0f} MB; same rows, order, uuids, dropped rows and counts: {identical}")
    print(f"total wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
