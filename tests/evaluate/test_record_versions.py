"""Run records are versioned: a record written now carries the current version, a version-1 record (as the first
versions wrote it: no label, no comparability key, label sets known by ``sha256`` alone, no taxa) is lifted when it
is read and compares and reports as its current-shape twin does, the lift is idempotent, and a record of a newer
version is refused in one line (exit 4)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.comparability import comparability_of
from cladebench.evaluate.record import RUN_FILE, RunRecord, checked_shape
from cladebench.evaluate.record_versions import RECORD_VERSION, current_shape
from helpers.checkpoint_runs import deep_checkpoint_runs

LATER_FIELDS = ("labels_count", "labels_sha256", "taxa_sha256", "labels_omitted")
"""What a label set of a version-1 record lacks."""


def as_version_1(run: Path, out: Path) -> Path:
    """A copy of the run at ``run`` as version 1 wrote it: without the fields added since."""
    shutil.copytree(run, out)
    data = json.loads((out / RUN_FILE).read_text())
    data["record_version"] = 1
    data.pop("label")
    provenance = data["provenance"]
    provenance.pop("comparability")
    for entry in [provenance.get("label_set"), *(provenance.get("label_sets") or {}).values()]:
        for key in LATER_FIELDS:
            (entry or {}).pop(key, None)
    (out / RUN_FILE).write_text(json.dumps(data, indent=2))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Zero-shot runs of one tiny model under scientific and common names, and their version-1 copies."""
    root = tmp_path_factory.mktemp("versions")
    deep_checkpoint_runs(root, {"sci": ["--name-style", "sci"], "com": ["--name-style", "com"]})
    found = {name: root / name for name in ("sci", "com")}
    for name in ("sci", "com"):
        found[f"v1-{name}"] = as_version_1(root / name, root / f"v1-{name}")
    return found


def _said(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_record_written_now_carries_the_current_version(runs) -> None:
    assert RECORD_VERSION == 2
    assert json.loads((runs["sci"] / RUN_FILE).read_text())["record_version"] == RECORD_VERSION
    assert RunRecord(task="zeroshot", metrics={}, provenance={}, config={}).record_version == RECORD_VERSION


def test_a_version_1_record_reads_in_the_current_shape(runs) -> None:
    new, old = RunRecord.read(runs["sci"]), RunRecord.read(runs["v1-sci"])
    assert old.record_version == new.record_version == RECORD_VERSION
    assert old.label == new.label == "tiny-clip · sci"
    assert old.provenance["label_set"]["labels_sha256"] == new.provenance["label_set"]["sha256"]
    stored = old.provenance["comparability"]
    assert stored["rows_sha256"] == new.provenance["comparability"]["rows_sha256"]
    assert stored["rank"] == "species" and stored["taxa_sha256"] is None  # its taxa were never recorded
    facts_old, facts_new = comparability_of(old), comparability_of(new)
    for key in ("rows_sha256", "rank", "split_sha256", "shots", "gallery"):
        assert facts_old[key] == facts_new[key], key
    assert facts_old["label_set_sha256"] == new.provenance["label_set"]["sha256"]


def test_the_lift_is_idempotent(runs) -> None:
    data = checked_shape(json.loads((runs["v1-com"] / RUN_FILE).read_text()))
    once = current_shape(data)
    assert data["record_version"] == 1 and "label" not in data  # the file's object is not changed
    assert current_shape(once) == once
    assert current_shape(json.loads(json.dumps(once))) == once
    current = checked_shape(json.loads((runs["com"] / RUN_FILE).read_text()))
    assert current_shape(current) == current


def test_a_version_1_pair_compares_as_before(runs, capsys) -> None:
    code_new, new, _ = _said(capsys, ["compare", str(runs["sci"]), str(runs["com"])])
    code_old, old, _ = _said(capsys, ["compare", str(runs["v1-sci"]), str(runs["v1-com"])])
    assert code_new == code_old == 0
    assert "beats [1] tiny-clip · sci" in old  # paired, as two name styles of as many labels always were
    assert old.replace("v1-", "") == new


def _leaderboard_cells(report: str) -> list[list[str]]:
    """The value cells of the report's leaderboard rows (marks, which say what was paired, left out)."""
    rows = [line for line in report.splitlines() if re.match(r"\| \[\d\] \| tiny-clip", line)]
    return [[re.sub(r" \((best|worse|tied|not tested)[^)]*\)", "", cell).strip() for cell in row.split("|")[2:]]
            for row in rows]


def test_a_version_1_record_reports_as_before(runs, tmp_path, capsys) -> None:
    reports: dict[str, Any] = {}
    for version, prefix in (("new", ""), ("old", "v1-")):
        out = tmp_path / f"{version}.md"
        code, _, _ = _said(capsys, ["report", str(runs[f"{prefix}sci"]), str(runs[f"{prefix}com"]),
                                    "--out-file", str(out), "--format", "md"])
        assert code == 0
        reports[version] = out.read_text()
    assert _leaderboard_cells(reports["old"]) == _leaderboard_cells(reports["new"]) != []
    assert "tiny-clip · sci" in reports["old"] and "tiny-clip · com" in reports["old"]


@pytest.mark.parametrize("verb", ["compare", "report"])
def test_a_record_of_a_newer_version_is_refused_in_one_line(runs, tmp_path, capsys, verb: str) -> None:
    future = shutil.copytree(runs["sci"], tmp_path / "future")
    data = json.loads((future / RUN_FILE).read_text())
    data["record_version"] = RECORD_VERSION + 1
    (future / RUN_FILE).write_text(json.dumps(data))
    # report leaves out a run it cannot read and reports the rest: given only this one, it has none left
    given = [str(future), "--out-file", str(tmp_path / "r.md"), "--format", "md"] if verb == "report" else [
        str(runs["com"]), str(future)]
    code, _, err = _said(capsys, [verb, *given])
    assert code == 4
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"record version {RECORD_VERSION + 1}" in lines[0] and "upgrade cladebench" in lines[0]
    assert not (tmp_path / "r.md").exists()
