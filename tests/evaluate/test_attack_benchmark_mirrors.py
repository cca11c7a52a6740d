"""Hostile Fine-Grained Challenges mirrors and ``--data`` mistakes: every one ends in one line and a documented exit
code, never exit 70 (a sidecar nested too deep to parse, one too large to be a sidecar, a blank revision, ``--data``
naming a file or the Lance table itself). The mirror is written here by hand in the published layout (not by
``cladebench.synthetic.mirrors``), with the publisher's other sidecar spelling (``model_id``, ``hf_revision``)."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from cladebench.cli import main
from cladebench.errors import SchemaError
from cladebench.models.registry import resolve_model
from cladebench.store import embeddings as store_embeddings
from cladebench.store.embeddings import check_published_embeddings, read_published_sidecar

PIN = resolve_model("bioclip-2").revision
SIDECAR = "data/challenges.embedding_models.json"


def _mirror(folder: Path, sidecar_text: str, *, field_revision: str | None = PIN) -> Path:
    """Two challenge groups of two species each (eight rows apiece) and two genus-only rows, with ``emb_bioclip2``
    planted per species, and ``sidecar_text`` as the release's sidecar."""
    rng = np.random.default_rng(0)
    rows = [(group, genus, f"{genus} {epithet}") for group, genus in (("Peromyscus", "Peromyscus"), ("Zebras", "Equus"))
            for epithet in ("alpha", "beta") for _ in range(8)]
    rows += [("Peromyscus", "Peromyscus", None), ("Zebras", "Equus", None)]
    centres = {s: rng.standard_normal(8) for s in {r[2] for r in rows}}
    metadata = {"model": "imageomics/bioclip-2", **({"revision": field_revision} if field_revision else {})}
    field = pa.field("emb_bioclip2", pa.list_(pa.float16()), metadata=metadata)
    table = pa.table({
        "uuid": [f"u{i}" for i in range(len(rows))], "challenge_group": [r[0] for r in rows],
        "seen_in_training": pa.array([[] if i % 2 else ["bioclip-2"] for i in range(len(rows))],
                                     pa.list_(pa.string())),
        "species": [r[2] for r in rows], "source_id": [str(i) for i in range(len(rows))],
        "kingdom": ["Animalia"] * len(rows), "phylum": ["Chordata"] * len(rows), "class": ["Mammalia"] * len(rows),
        "order": ["Rodentia"] * len(rows), "family": ["Cricetidae"] * len(rows), "genus": [r[1] for r in rows],
        "emb_bioclip2": pa.array([np.asarray(centres[r[2]] + 0.1 * rng.standard_normal(8), np.float16) for r in rows],
                                 field.type),
    }).cast(pa.schema([*(pa.field(n, t) for n, t in zip(
        ["uuid", "challenge_group", "seen_in_training", "species", "source_id", "kingdom", "phylum", "class", "order",
         "family", "genus"],
        [pa.string(), pa.string(), pa.list_(pa.string()), *[pa.string()] * 8], strict=True)), field]))
    lance.write_dataset(table, folder / "data" / "challenges.lance")
    (folder / SIDECAR).write_text(sidecar_text, encoding="utf-8")
    return folder


def _eval(folder: Path, out: Path, *extra: str) -> int:
    return main(["eval", "fewshot", "fine-grained-challenges", "--data", str(folder), "--out", str(out),
                 "--methods", "simpleshot", "--repetitions", "1", "--shots", "1", *extra])


def test_a_mirror_in_the_other_sidecar_spelling_is_read_and_checked(tmp_path, capsys):
    sidecar = json.dumps({"emb_bioclip2": {"model_id": "hf-hub:imageomics/bioclip-2", "hf_revision": PIN}})
    folder = _mirror(tmp_path / "fgc", sidecar, field_revision=None)
    assert _eval(folder, tmp_path / "run") == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    checked = record["provenance"]["dataset"]["benchmark_source"]["published_embeddings"]["emb_bioclip2"]
    assert checked["revision"] == PIN and checked["recorded_in"] == ["challenges.embedding_models.json"]
    # per group, never pooled; the genus-only rows never scored for species
    assert {m.split("/")[0] for m in record["metrics"]} == {"Peromyscus", "Zebras"}
    assert record["provenance"]["task_by_group"]["Zebras"]["rows"]["without_label"] == 1


def test_a_sidecar_nested_too_deep_is_a_schema_error_not_a_bug(tmp_path, capsys):
    folder = _mirror(tmp_path / "fgc", "[" * 100_000 + "]" * 100_000)
    assert _eval(folder, tmp_path / "run") == 4  # a schema error
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nested too deep" in err and "internal error" not in err
    assert not (tmp_path / "run").exists()


def test_a_sidecar_too_large_to_be_one_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(store_embeddings, "MAX_SIDECAR_BYTES", 1024)
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"emb_bioclip2": {"revision": PIN, "pad": "x" * 2000}}), encoding="utf-8")
    with pytest.raises(SchemaError, match="not a JSON sidecar") as error:
        read_published_sidecar(path)
    assert "\n" not in str(error.value)
    path.write_text(json.dumps({"emb_bioclip2": {"revision": PIN}}), encoding="utf-8")
    assert read_published_sidecar(path) == {"emb_bioclip2": {"revision": PIN}}


def test_a_blank_revision_counts_as_none_recorded(tmp_path):
    folder = _mirror(tmp_path / "fgc", "{}", field_revision=None)
    dataset = lance.dataset(str(folder / "data" / "challenges.lance"))
    checked = check_published_embeddings(dataset, sidecar={"emb_bioclip2": {"revision": "   "}}, sidecar_name="s")
    assert checked["emb_bioclip2"]["revision"] is None and checked["emb_bioclip2"]["pinned"] is False


def test_data_naming_a_file_or_the_table_itself_says_what_to_pass(tmp_path, capsys):
    folder = _mirror(tmp_path / "fgc", json.dumps({"emb_bioclip2": {"revision": PIN}}))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine", encoding="utf-8")
    assert _eval(a_file, tmp_path / "run") == 3
    assert "a file, not a folder" in capsys.readouterr().err
    assert _eval(folder / "data" / "challenges.lance", tmp_path / "run") == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is the Lance table itself" in err
    assert a_file.read_text(encoding="utf-8") == "mine"


@pytest.mark.slow
def test_two_processes_building_one_benchmark_at_once_both_end_with_the_first_build(tmp_path):
    """Two suites sharing a cache built the same mirror at once: the one that moved its build into place second
    failed (directory not empty) and its whole suite stopped. Now the second waits for the first and builds
    nothing."""
    import multiprocessing

    from helpers.build_race import build_held, build_second

    context = multiprocessing.get_context("spawn")
    path = tmp_path / "cache" / "bench.lance"
    started, release = context.Event(), context.Event()
    first = context.Process(target=build_held, args=(str(path), started, release))
    first.start()
    assert started.wait(60)
    second = context.Process(target=build_second, args=(str(path),))
    second.start()
    second.join(5)  # before the fix the second built and moved in at once; now it waits on the first's lock
    release.set()
    first.join(60)
    second.join(60)
    assert (first.exitcode, second.exitcode) == (0, 0)
    assert sorted(p.name for p in path.iterdir()) == ["first"]
    assert not [p.name for p in path.parent.iterdir() if ".partial-" in p.name]


@pytest.mark.parametrize(("sidecar", "why"), [
    ("missing", "there is no challenges.embedding_models.json"),
    ("", "challenges.embedding_models.json has no entry for it (it is empty)"),
    (json.dumps({"emb_bioclip": {"revision": PIN}}), "has no entry for it (its entries: emb_bioclip)"),
    ("folder", "challenges.embedding_models.json is a folder, not a file"),
])
def test_a_column_without_its_sidecar_entry_is_said_unverified_and_recorded_so(tmp_path, capsys, sidecar, why):
    """A mirror without the sidecar, with an empty one, one keyed by other columns or a folder in its place was read
    as the pinned model's without a word: the field metadata alone vouched for it."""
    folder = _mirror(tmp_path / "fgc", sidecar if sidecar not in ("missing", "folder") else "{}")
    if sidecar in ("missing", "folder"):
        (folder / SIDECAR).unlink()
    if sidecar == "folder":
        (folder / SIDECAR).mkdir()
    assert _eval(folder, tmp_path / "run") == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "not verified" in line]
    assert len(said) == 1 and "emb_bioclip2" in said[0] and why in said[0], said
    source = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]["dataset"]["benchmark_source"]
    entry = source["published_embeddings"]["emb_bioclip2"]
    assert (entry["pinned"], entry["verified"]) == (True, False) and why in entry["unverified_reason"]
    assert source["unverified_embeddings"] == ["emb_bioclip2"]


def test_a_column_its_sidecar_vouches_for_is_verified_without_a_word(tmp_path, capsys):
    folder = _mirror(tmp_path / "fgc", json.dumps({"emb_bioclip2": {"revision": PIN}}))
    assert _eval(folder, tmp_path / "run") == 0
    assert "not verified" not in capsys.readouterr().err
    source = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]["dataset"]["benchmark_source"]
    assert source["published_embeddings"]["emb_bioclip2"]["verified"] and source["unverified_embeddings"] == []
