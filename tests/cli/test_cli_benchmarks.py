"""`cladebench benchmarks`: every named benchmark with its tasks, source and pinned release, and whether its data
is mirrored or built here; offline and without opening anything."""

from __future__ import annotations

import json

from cladebench.cli import main


def test_the_list_names_every_benchmark_with_its_tasks_and_release(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(tmp_path / "mirrors"))
    (tmp_path / "mirrors" / "crypticbio-invasive").mkdir(parents=True)
    assert main(["benchmarks", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"fine-grained-challenges", "test-fine-grained-challenges", "crypticbio-common",
                         "crypticbio-commonunseen", "crypticbio-endangered", "crypticbio-invasive", "inquire-rerank",
                         "inat-coobserved"}
    fgc = rows["fine-grained-challenges"]
    assert fgc["tasks"] == ["zeroshot", "fewshot", "retrieval"] and fgc["release"] == "v0.1.0"
    assert fgc["source"] == "hf://datasets/imageomics/fine-grained-challenges/data/challenges.lance"
    assert "opened remotely" in fgc["here"]
    assert rows["crypticbio-invasive"]["here"].startswith("mirrored (")
    assert rows["inquire-rerank"]["release"] is None and rows["inquire-rerank"]["here"].startswith("not built")
    assert main(["benchmarks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "tasks", "release", "here", "source"] and len(lines) == 1 + len(rows)
    assert any(line.startswith("crypticbio-common ") and " unpinned " in line for line in lines)
