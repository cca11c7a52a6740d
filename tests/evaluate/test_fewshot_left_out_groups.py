"""A grouped few-shot run on a Fine-Grained Challenges mirror where one challenge group is too small for the shots:
that group alone is left out, with the task's reason in the run record, the printed summary, the report (n/a) and
the results of a suite; only a run none of whose groups can be split fails (exit 1, one line naming each group)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.store.sql import sql_literal
from cladebench.synthetic import make_world
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_finegrained_mirror

ARGS = ("--repetitions", "2", "--methods", "simpleshot", "knn", "--shots", "5")


@pytest.fixture(scope="module")
def thin_mirror(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """A mirror whose last challenge group keeps only its unseen rows (about three images per species: too few
    for 5 shots), while the other groups keep ten per species."""
    folder = tmp_path_factory.mktemp("thin") / "fine-grained-challenges"
    path = write_finegrained_mirror(folder, make_world(MIRROR_WORLD))
    dataset = store.open_dataset(path)
    groups = sorted(set(store.read(dataset, columns=["challenge_group"]).column(0).to_pylist()))
    small = groups[-1]
    dataset.delete(f"challenge_group = {sql_literal(small)} AND array_length(seen_in_training) > 0")
    return folder, small, groups


def test_a_group_too_small_for_the_shots_is_left_out_and_the_others_are_evaluated(thin_mirror, tmp_path,
                                                                                   monkeypatch, capsys):
    folder, small, groups = thin_mirror
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["eval", "fewshot", "fine-grained-challenges", "--data", str(folder), "--out", str(out),
                 *ARGS]) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / "run.json").read_text())
    provenance = record["provenance"]
    evaluated = [g for g in groups if g != small]
    assert provenance["groups"]["values"] == groups
    assert list(provenance["groups"]["left_out"]) == [small]
    reason = provenance["groups"]["left_out"][small]
    assert "too few groups for 5 shots" in reason
    # The evaluated groups have their numbers; the left-out group has every one of them, without a value, with why.
    for group in evaluated:
        assert record["metrics"][f"{group}/simpleshot_5shot"]["value"] > 0
    names = {m.split("/", 1)[1] for m in record["metrics"] if m.startswith(f"{evaluated[0]}/")}
    measures = ("", "_balanced", "_mistake_severity", "_hdist1", "_hdist5",
                *(f"_{rank}" for rank in ("kingdom", "phylum", "class", "order", "family", "genus")))
    assert names == {f"{method}_5shot{measure}" for method in ("simpleshot", "knn") for measure in measures}
    for name in names:
        estimate = record["metrics"][f"{small}/{name}"]
        assert estimate["value"] is None and estimate["n"] == 0 and estimate["left_out"] == reason
    assert set(provenance["label_sets"]) == set(evaluated) == set(provenance["split_by_group"])
    predicted = pq.read_table(out / "predictions.parquet")
    assert set(predicted.column("group").to_pylist()) == set(evaluated)
    # The printed summary says it: two groups evaluated, one left out, and why.
    assert "2 challenge_group groups evaluated separately" in printed and "1 left out" in printed
    assert f"{small}/*  n/a: challenge_group {small!r} left out: {reason}" in printed
    # The report shows the group as n/a with the reason, in Markdown and in HTML.
    for form in ("md", "html"):
        report = tmp_path / f"report.{form}"
        assert main(["report", str(out), "--out-file", str(report), "--format", form, "--max-gallery", "0"]) == 0
        text = report.read_text()
        assert "left out: few-shot needs at least 2 classes" in text
    markdown = (tmp_path / "report.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {small} |"))
    assert "n/a" in row and "left out" in row


def test_no_group_large_enough_fails_the_run_naming_each_group(thin_mirror, tmp_path, monkeypatch, capsys):
    folder, _, groups = thin_mirror
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    code = main(["eval", "fewshot", "fine-grained-challenges", "--data", str(folder), "--out", str(out),
                 "--unseen-only", *ARGS])
    err = capsys.readouterr().err.strip().splitlines()  # 5 shots is one of the protocol's runs: on protocol
    assert code == 1 and len(err) == 1
    assert "no challenge_group group can be evaluated" in err[0]
    assert all(f"{group!r}: few-shot needs at least 2 classes" in err[0] for group in groups)
    assert not (out / "run.json").exists()


def test_a_pooled_run_too_small_still_fails(thin_mirror, tmp_path, monkeypatch, capsys):
    folder, small, _ = thin_mirror
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["eval", "fewshot", "fine-grained-challenges", "--data", str(folder), "--out", str(tmp_path / "run"),
                 "--group-by", "none", "--where", f"challenge_group = {sql_literal(small)}", *ARGS])
    off, *err = capsys.readouterr().err.strip().splitlines()
    assert "off protocol" in off and "--group-by none (protocol: challenge_group)" in off
    assert code == 1 and len(err) == 1 and "too few groups for 5 shots" in err[0]
