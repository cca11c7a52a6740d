"""`cladebench eval --task lineage` with a VLM behind a real local endpoint: the run prints its summary and exits 0
(a VLM names taxa freely, so the run has no label set to count)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import label_set_sizes
from helpers.lineage_vlm import VLM_PHOTOS


def test_lineage_with_a_vlm_prints_its_summary_and_exits_0(lineage_photos, lineage_endpoint, tmp_path: Path,
                                                           monkeypatch, capsys) -> None:
    path, _, _ = lineage_photos
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = f"openai-compatible:tiny-vlm@http://127.0.0.1:{lineage_endpoint.server_address[1]}/v1"
    code = main(["eval", "lineage", str(path), "--model", model, "--out", str(tmp_path / "run"),
                 "--group-by", "none", "--vlm-concurrency", "2"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    lines = printed.out.splitlines()
    assert lines[0] == f"lineage on {path} with {model} ({VLM_PHOTOS} images)"
    assert any(line.split()[0] == "hint_exact" for line in lines[1:])
    assert lines[-1] == f"run record: {tmp_path / 'run' / 'run.json'}"
    record = RunRecord.read(tmp_path / "run" / "run.json")
    assert label_set_sizes(record) == {}
    assert record.provenance["model"]["id"] == model and record.provenance["model"]["named_by"] == "--model"
    json.loads((tmp_path / "run" / "run.json").read_text())


def test_label_set_sizes_skip_groups_without_a_label_set() -> None:
    def record(label_set, label_sets) -> RunRecord:
        return RunRecord(task="lineage", metrics={}, provenance={"label_set": label_set, "label_sets": label_sets},
                         config={})

    assert label_set_sizes(record({"labels": []}, None)) == {}
    assert label_set_sizes(record({"size": 4, "labels": ["a"]}, None)) == {"all": 4}
    assert label_set_sizes(record(None, {"g1": {"labels": []}, "g2": {"size": 3, "labels": []}})) == {"g2": 3}
