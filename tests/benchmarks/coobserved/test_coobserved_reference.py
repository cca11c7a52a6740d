"""The co-observed builder gives the same dataset as the reference build recorded before its reader was reworked
for speed (one scan of photos.csv instead of two, each typed column cast once, one aggregate per photo id).

The reference (``coobserved_reference.json`` beside this module) holds, for two builds of one synthetic export
(uncapped; and the default caps with excluded photo ids, TreeOfLife species and another seed): the kept photo
ids in order, the uuid fingerprint, a SHA-256 of every row of ``data/coobserved.parquet`` and of
``left_out.parquet`` (photo id and reason), and every count of the summary. It also holds the export's file
hashes, so a change of the synthetic generator is reported as such rather than as a change of the builder.

Regenerate it (``python tests/benchmarks/coobserved/test_coobserved_reference.py``) only for a change that
is meant to change the built dataset, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cladebench.benchmarks.coobserved.builder.build import build_coobserved
from cladebench.benchmarks.coobserved.builder.config import DATA_FILE, CoObservedBuildConfig
from cladebench.synthetic.inat_export import ExportConfig, ExportManifest, write_export

REFERENCE = Path(__file__).with_name("coobserved_reference.json")
EXPORT = ExportConfig(n_photos=6000, n_coobserved=72, seed=3)
UNCAPPED = {"per_rank": 100_000, "max_per_species": 100_000, "max_per_observer": 100_000}
SUMMARY_FIELDS = ("rows", "fingerprint", "row_issues", "photo_outcomes", "photo_ids", "eligible", "eligible_per_rank",
                  "kept_per_rank", "kingdom_pairs", "class_pairs", "species", "licenses", "notes")


def _sha256(rows: list[dict[str, Any]]) -> str:
    text = json.dumps(rows, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _builds(manifest: ExportManifest, work: Path, **build_options: Any) -> dict[str, dict[str, Any]]:
    """The two builds of the reference, each reduced to what must not change."""
    excluded = sorted(p.photo_id for p in manifest.eligible)[::9]
    (work / "exclude.txt").write_text("".join(f"{i}\n" for i in excluded), encoding="utf-8")
    tol = sorted({name for p in manifest.eligible for name in p.scientific_names})[::3]
    (work / "tol.txt").write_text("".join(f"{name}\n" for name in tol), encoding="utf-8")
    configs = {
        "uncapped": {**UNCAPPED},
        "capped": {"exclude_photo_ids": work / "exclude.txt", "tol_species": work / "tol.txt", "seed": 11,
                   "per_rank": 9, "max_per_species": 2, "max_per_observer": 4},
    }
    results = {}
    for name, options in configs.items():
        out = work / f"out-{name}"
        summary = build_coobserved(CoObservedBuildConfig(manifest.export_dir, out, **options), **build_options)
        data = pq.read_table(out / DATA_FILE).to_pylist()
        dropped = pq.read_table(out / "left_out.parquet", columns=["photo_id", "reason"]).to_pylist()
        described = summary.as_dict()
        results[name] = {
            "photo_ids": [row["photo_id"] for row in data],
            "data_sha256": _sha256(data),
            "dropped_sha256": _sha256(dropped),
            "dropped_rows": len(dropped),
            "lines_read": {t: f["rows"] for t, f in summary.files.items()},
            **{k: described[k] for k in SUMMARY_FIELDS},
        }
    return results


def _inputs(manifest: ExportManifest) -> dict[str, str]:
    return {t: hashlib.sha256(Path(p).read_bytes()).hexdigest() for t, p in sorted(manifest.files.items())}


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> ExportManifest:
    return write_export(tmp_path_factory.mktemp("export"), EXPORT)


def test_the_synthetic_export_is_the_one_the_reference_was_built_from(manifest, reference):
    assert _inputs(manifest) == reference["inputs"], (
        "the synthetic export generator changed: the reference no longer describes this input")


@pytest.mark.parametrize("build_options", [{}, {"threads": 1, "memory_limit": "64MB"}], ids=["default", "1-thread"])
def test_the_built_dataset_equals_the_reference(manifest, reference, tmp_path, build_options):
    if _inputs(manifest) != reference["inputs"]:
        pytest.skip("the synthetic export changed (see the test above)")
    built = _builds(manifest, tmp_path, **build_options)
    for name, expected in reference["builds"].items():
        got = json.loads(json.dumps(built[name], default=str))
        assert got["photo_ids"] == expected["photo_ids"], name  # same rows, same order
        assert got == expected, name
    assert reference["builds"]["capped"]["rows"] > 0  # the capped build keeps some rows and drops others by caps
    assert reference["builds"]["capped"]["photo_outcomes"]["species_cap"] > 0


def main(argv: list[str]) -> int:
    """Record the reference from the builder as it is now."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="coobserved-reference-"))
    manifest = write_export(work / "export", EXPORT)
    builds = _builds(manifest, work)
    REFERENCE.write_text(json.dumps({"inputs": _inputs(manifest), "builds": builds}, indent=1, default=str) + "\n",
                         encoding="utf-8")
    print(f"wrote {REFERENCE}: " + ", ".join(f"{k} {v['rows']} rows" for k, v in builds.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
