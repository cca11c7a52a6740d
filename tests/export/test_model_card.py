"""``cladebench export model-card`` on a small real suite: the card read back by huggingface_hub gives the metrics and
datasets of ``results --format json``; an existing card keeps its body and other metadata; hostile names survive
the YAML; a file that is not a card, or one the export reads, is refused; a missing library is one line."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("huggingface_hub")
from huggingface_hub import ModelCard

from cladebench.cli import main
from cladebench.export.model_card import SOURCE_NAME
from helpers.export_suite import HOSTILE_BENCHMARK, rename_benchmark


def _json_rows(capsys, folder) -> list[dict]:
    assert main(["results", str(folder), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _on_card(rows: list[dict], model: str) -> dict[tuple[str, str], float]:
    """(benchmark, metric) -> value of the rows a card of ``model`` carries: every value but breakdowns."""
    return {(r["benchmark"], r["metric"]): r["value"] for r in rows if r["model"] == model
            and r["value"] is not None and "=" not in r["metric"].rpartition("/")[0]}


def test_the_card_read_back_gives_the_json_metrics_and_datasets(export_suite, capsys, tmp_path):
    out, models = export_suite["out"], export_suite["models"]
    rows = _json_rows(capsys, out)
    card_path = tmp_path / "card" / "README.md"
    for model in models:
        assert main(["export", "model-card", str(out), "--model", model, "--out-file", str(card_path)]) == 0
        said = capsys.readouterr().out
        assert "nothing uploaded" in said and "left out: 1 run of other models" in said.replace("runs", "run")
        card = ModelCard.load(card_path)
        results = card.data.eval_results
        assert card.data.model_name == models[0]  # the card's own name is kept on an update
    # The second export replaced nothing of the first's: same datasets and metrics, so the card holds the second
    # model's values (each entry is keyed by dataset, split, task and metric).
    expected = _on_card(rows, models[1])
    got = {(e.dataset_name, e.metric_name): e.metric_value for e in results}
    assert got == expected and len(results) == len(expected)
    for entry in results:
        row = next(r for r in rows if r["model"] == models[1] and r["metric"] == entry.metric_name)
        assert (entry.metric_args["low"], entry.metric_args["high"], entry.metric_args["n"]) == (
            row["low"], row["high"], row["n"])
        assert entry.dataset_type == "evendrow/INQUIRE-Rerank" and entry.dataset_split == "test"
        assert entry.source_name == SOURCE_NAME and entry.task_name == row["protocol"]
        assert entry.metric_args["interval"] == "percentile bootstrap"


def test_an_existing_card_keeps_its_body_metadata_and_other_sources(export_suite, capsys, tmp_path):
    card_path = tmp_path / "README.md"
    card_path.write_text("---\nlicense: mit\ntags:\n- biology\nmodel-index:\n- name: my-model\n  results:\n"
                         "  - task:\n      type: image-classification\n    dataset:\n      name: Other\n"
                         "      type: other/set\n    metrics:\n    - type: accuracy\n      value: 0.9\n"
                         "    source:\n      name: the paper\n      url: https://example.org/paper\n---\n\n"
                         "# My model\n\nIt is *mine*.\n")
    model = export_suite["models"][1]
    args = ["export", "model-card", str(export_suite["out"]), "--model", model, "--out-file", str(card_path)]
    assert main(args) == 0
    first = card_path.read_text()
    card = ModelCard.load(card_path)
    assert card.text == "\n# My model\n\nIt is *mine*.\n"
    assert card.data.license == "mit" and card.data.tags == ["biology"] and card.data.model_name == "my-model"
    assert [e.dataset_name for e in card.data.eval_results if e.source_name == "the paper"] == ["Other"]
    assert "1 kept from before" in capsys.readouterr().out
    assert main(args) == 0  # again: its own entries replaced, nothing added
    assert card_path.read_text() == first


def test_hostile_names_survive_the_card(export_suite, capsys, tmp_path):
    folder = rename_benchmark(export_suite["out"], tmp_path / "copy")
    hostile = export_suite["models"][0]
    card_path = tmp_path / "README.md"
    assert main(["export", "model-card", str(folder), "--model", hostile, "--out-file", str(card_path)]) == 0
    said = capsys.readouterr().out
    assert all(line.startswith((str(card_path), "  left out: ")) for line in said.splitlines())
    card = ModelCard.load(card_path)
    assert card.data.model_name == hostile
    assert {e.dataset_name for e in card.data.eval_results} == {HOSTILE_BENCHMARK}
    assert _on_card(_json_rows(capsys, folder), hostile) == {
        (e.dataset_name, e.metric_name): e.metric_value for e in card.data.eval_results}


def test_a_run_record_given_directly_and_one_that_does_not_check(export_suite, capsys, tmp_path):
    out, model = export_suite["out"], export_suite["models"][1]
    run = next(r["run"] for r in _json_rows(capsys, out) if r["model"] == model)
    card_path = tmp_path / "README.md"
    assert main(["export", "model-card", str((out / run).parent), "--model", model, "--out-file", str(card_path)]) == 0
    capsys.readouterr()
    assert {e.metric_name for e in ModelCard.load(card_path).data.eval_results} >= {"ap@100", "mrr@100"}
    broken = tmp_path / "broken"
    (broken).mkdir()
    record = json.loads((out / run).read_text())
    record["metrics"]["ap@100"]["value"] = 99.0
    (broken / "run.json").write_text(json.dumps(record))
    (broken / "predictions.parquet").write_bytes((out / run).with_name("predictions.parquet").read_bytes())
    assert main(["export", "model-card", str(broken), str((out / run).parent), "--model", model, "--out-file",
                 str(tmp_path / "two.md")]) == 0
    said = capsys.readouterr().out
    assert f"left out: {broken}: not exported, its numbers did not check" in said
    assert 99.0 not in [e.metric_value for e in ModelCard.load(tmp_path / "two.md").data.eval_results]


def test_what_is_no_card_is_refused_before_any_work(export_suite, capsys, tmp_path):
    out, model = export_suite["out"], export_suite["models"][1]
    run = next(r["run"] for r in _json_rows(capsys, out) if r["model"] == model)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    bad_yaml = tmp_path / "bad.md"
    bad_yaml.write_text("---\nlicense: [unclosed\n---\nbody\n")
    for target, code, words in ((notes, 2, "is not a model card"), (bad_yaml, 2, "does not parse"),
                                (out / run, 2, "is not a model card"), (out / "results.parquet", 2, "the input"),
                                (tmp_path, 1, "is a folder")):
        before = target.read_bytes() if target.is_file() else None
        assert main(["export", "model-card", str(out), "--model", model, "--out-file", str(target)]) == code
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
        assert (target.read_bytes() if target.is_file() else None) == before
    assert main(["export", "model-card", str(out), "--model", "nosuch", "--out-file", str(tmp_path / "R.md")]) == 1
    err = capsys.readouterr().err.strip()
    assert "no finished run of nosuch" in err and not (tmp_path / "R.md").exists()


def test_without_huggingface_hub_it_is_one_line_with_the_pip_command(export_suite, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    assert main(["export", "model-card", str(export_suite["out"]), "--model", "m", "--out-file",
                 str(tmp_path / "README.md")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'cladebench[hub]'" in err
