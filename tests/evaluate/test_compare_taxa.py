"""Runs of the same taxa under scientific and common names are one label set to ``compare`` (their comparability
key holds the taxa, whatever the name style); runs of other taxa are not paired, and the words say what differs.
Records written before the taxa were kept still read, by their label strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.evaluate.compare import comparability_of, compare_runs, incomparable
from cladebench.evaluate.record import RUN_FILE, RunRecord
from helpers.checkpoint_runs import deep_checkpoint_runs


@pytest.fixture(scope="module")
def styles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real zero-shot runs of one tiny model: scientific and common names of the same taxa, and a run on the rows
    of one class only (fewer taxa)."""
    root = tmp_path_factory.mktemp("taxa")
    dataset, _ = deep_checkpoint_runs(root, {"sci": ["--name-style", "sci"], "com": ["--name-style", "com"]})
    first_class = sorted(set(store.open_dataset(str(dataset)).to_table(columns=["class"]).column("class")
                             .to_pylist()))[0]
    deep_checkpoint_runs(root / "again", {"one-class": ["--name-style", "sci", "--where", f"class = '{first_class}'"]})
    return {"sci": root / "sci", "com": root / "com", "one-class": root / "again" / "one-class"}


def test_name_styles_of_the_same_taxa_share_the_key_and_are_paired(styles) -> None:
    sci, com = RunRecord.read(styles["sci"]), RunRecord.read(styles["com"])
    keys = sci.provenance["comparability"], com.provenance["comparability"]
    assert keys[0]["label_set_sha256"] != keys[1]["label_set_sha256"]  # the label strings differ
    assert keys[0]["taxa_sha256"] == keys[1]["taxa_sha256"] is not None  # the taxa do not
    assert comparability_of(sci)["label_set"] == comparability_of(com)["label_set"]
    assert incomparable(sci, com) is None
    comparison = compare_runs([styles["sci"], styles["com"]], metric="top1_species", n_resamples=200)
    (entry,) = comparison.metrics
    assert [d.run for d in entry.differences] == [1] and entry.unpaired == ()


def test_other_taxa_are_not_paired_and_said_in_words(styles) -> None:
    sci, fewer = RunRecord.read(styles["sci"]), RunRecord.read(styles["one-class"])
    assert comparability_of(sci)["taxa_sha256"] != comparability_of(fewer)["taxa_sha256"]
    size, few = sci.provenance["label_set"]["size"], fewer.provenance["label_set"]["size"]
    only = sorted(set(sci.provenance["label_set"]["labels"]) - set(fewer.provenance["label_set"]["labels"]))
    assert few < size and only
    said = incomparable(fewer, sci)
    assert said.startswith(f"different taxa ({size} vs {few} species; only in this run: {only[0]}")
    assert "sha256" not in said and "label_set" not in said
    comparison = compare_runs([styles["one-class"], styles["sci"]], metric="top1_species", n_resamples=200,
                              intersect=True)
    (entry,) = comparison.metrics
    assert entry.differences == () and entry.unpaired == ((1, said),)


def test_records_without_the_taxa_still_read(styles, tmp_path) -> None:
    """A record written before runs kept their taxa falls back on its label strings: two name styles with as many
    labels are taken as one label set, as before."""
    import shutil

    copies = []
    for name in ("sci", "com"):
        folder = shutil.copytree(styles[name], tmp_path / name)
        record = json.loads((folder / RUN_FILE).read_text())
        record["provenance"]["label_set"].pop("taxa_sha256")
        for key in ("taxa_sha256", "taxa_sets_sha256"):
            record["provenance"]["comparability"].pop(key)
        (folder / RUN_FILE).write_text(json.dumps(record))
        copies.append(folder)
    old = [RunRecord.read(folder) for folder in copies]
    assert comparability_of(old[0])["taxa_sha256"] is None
    assert incomparable(old[0], old[1]) is None
    comparison = compare_runs(copies, metric="top1_species", n_resamples=200)
    assert [d.run for d in comparison.metrics[0].differences] == [1]
