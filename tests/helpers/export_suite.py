"""A small real suite for the export tests: INQUIRE-Rerank's mirror, two tiny models, one of them named by a folder
whose name is hostile (an underscore, ``%``, ``&``, quotes, a newline); written by ``cladebench suite`` itself, so
every number is a checked run record's. :func:`rename_benchmark` makes a copy whose runs name a hostile benchmark."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

HOSTILE_MODEL = "tiny_a%&'\"\nx {y}#$~^\\"
"""The folder name of the first model: every character LaTeX, YAML and MLflow keys give a meaning to."""
HOSTILE_BENCHMARK = "bench_%&\"'\nmark"


def build_export_suite(root: Path) -> dict[str, Any]:
    """The suite folder (``root / 'out'``), the two models as the suite names them, and the suite's arguments
    without --out (to run it again elsewhere)."""
    from cladebench.cli import main
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import make_world
    from cladebench.synthetic.mirrors import MIRROR_WORLD, write_inquire_rerank_mirror

    write_inquire_rerank_mirror(root / "mirrors" / "inquire-rerank", make_world(MIRROR_WORLD))
    models = ["local-dir:" + str(write_tiny_model(root / name, seed=seed))
              for name, seed in ((HOSTILE_MODEL, 0), ("tiny-b", 2))]
    out = root / "out"
    args = ["suite", *(a for m in models for a in ("--model", m)), "--benchmarks", "inquire-rerank", "--mirror",
            str(root / "mirrors"), "--device", "cpu", "--no-report", "--no-progress"]
    assert main([*args, "--out", str(out)]) == 0
    return {"out": out, "models": models, "args": args}


def rename_benchmark(out: Path, copy: Path, name: str = HOSTILE_BENCHMARK) -> Path:
    """A copy of the suite folder ``out`` whose runs (records and table rows) name the benchmark ``name``; each
    record is written again through :meth:`RunRecord.write`, so it still checks against its predictions."""
    import pyarrow as pa

    from cladebench.evaluate.record import RunRecord
    from cladebench.evaluate.suite.results import SCHEMA, read_results
    from cladebench.paths import atomic_write_parquet

    shutil.copytree(out, copy)
    rows = read_results(copy).to_pylist()
    for run in {r["run"] for r in rows if r["run"]}:
        record = RunRecord.read(copy / run)
        record.provenance["dataset"]["benchmark"] = name
        record.write((copy / run).parent, record.predictions(copy / run))
    for row in rows:
        row["benchmark"] = name
    atomic_write_parquet(copy / "results.parquet", pa.Table.from_pylist(rows, schema=SCHEMA))
    return copy
