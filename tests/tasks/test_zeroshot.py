"""Zero-shot through the real path (dataset -> embed -> task -> run record) with a real tiny open_clip model,
checked against an independent per-image computation."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.taxonomy import Lineage, Rank

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.evaluate.configs import ZeroShotEvalConfig
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import run_eval
from cladebench.models import load_encoder
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world
from cladebench.tasks.common import label_set
from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot
from cladebench.templates import get_templates
from helpers.embedded import write_embedded


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("zeroshot")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=3))
    world = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3)))
    table = world.to_table(60, seed=5, image_format="jpeg")
    path = root / "world.lance"
    write_embedded(table, path, model)
    return path, model


def independent_text_embedding(encoder, label: str, templates: tuple[str, ...]) -> np.ndarray:
    rows = encoder.encode_texts([t.replace("{c}", label) for t in templates])
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    mean = rows.mean(axis=0)
    return mean / np.linalg.norm(mean)


def test_label_set_keeps_homonyms_apart_and_is_sorted() -> None:
    lineages = [
        Lineage.from_names("Plantae", "Tracheophyta", "Liliopsida", "Asparagales", "Orchidaceae", "Laelia", "rosea"),
        Lineage.from_names("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),
        Lineage.from_names("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),
    ]
    genera = label_set(lineages, Rank.GENUS)
    assert len(genera) == 2 and genera.taxa[0][0] == "Animalia"
    assert genera.texts("sci") == ["Laelia", "Laelia"]
    assert genera.texts("taxon")[1] == "Plantae Tracheophyta Liliopsida Asparagales Orchidaceae Laelia"


def test_predictions_match_an_independent_computation(embedded: tuple[Path, str]) -> None:
    path, model = embedded
    encoder = load_encoder(model, device="cpu")
    dataset = store.open_dataset(path)
    predictions = zero_shot(dataset, encoder, ZeroShotConfig(name_style="taxon", templates="bioclip"))
    table = predictions.table.to_pylist()

    rows = dataset.to_table(columns=["uuid", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                                     "emb_tiny"]).to_pylist()
    by_uuid = {r["uuid"]: r for r in rows}
    species = sorted({tuple(r[c] for c in ("kingdom", "phylum", "class", "order", "family", "genus", "species"))
                      for r in rows})
    labels = [Lineage(s).label("taxon") for s in species]
    assert predictions.labels == labels
    templates = get_templates("bioclip")
    text = np.stack([independent_text_embedding(encoder, label, templates) for label in labels])
    scale = encoder.logit_scale
    for prediction in table:
        row = by_uuid[prediction["uuid"]]
        image = np.asarray(row["emb_tiny"], dtype=np.float64)
        logits = scale * (text @ (image / np.linalg.norm(image)))
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        assert prediction["pred_label"] == labels[int(np.argmax(probs))]
        truth = labels.index(Lineage(tuple(row[c] for c in ("kingdom", "phylum", "class", "order", "family",
                                                                 "genus", "species"))).label("taxon"))
        assert prediction["correct_top1"] == (int(np.argmax(probs)) == truth)
        assert prediction["true_prob"] == pytest.approx(probs[truth], rel=1e-4)
        # Genus by summing species probabilities per genus (a per-image dict loop, as pybioclip does it).
        per_genus: dict[tuple[str, ...], float] = defaultdict(float)
        for s, p in zip(species, probs, strict=True):
            per_genus[s[:6]] += p
        best_genus = max(per_genus, key=per_genus.get)
        assert prediction["pred_genus"] == best_genus[-1]
        assert prediction["correct_genus"] == (best_genus == tuple(row[c] for c in (
            "kingdom", "phylum", "class", "order", "family", "genus")))


def test_eval_writes_a_run_record_with_provenance(embedded: tuple[Path, str], tmp_path: Path) -> None:
    path, model = embedded
    record, run_path = run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "run", device="cpu",
                                           name_style="sci", templates="photo", logit_scale="100",
                                                   group_by="none"))
    loaded = RunRecord.read(run_path)
    assert loaded.metrics == json.loads(json.dumps(record.metrics))
    provenance = loaded.provenance
    dataset = store.open_dataset(path)
    assert provenance["dataset"]["fingerprint"] == store.fingerprint(dataset)
    assert provenance["dataset"]["version"] == dataset.version
    assert provenance["model"]["id"] == model and provenance["model"]["revision"].startswith("sha256:")
    assert provenance["model"]["image_embeddings"]["preprocessing"]["mode"] == "openclip"
    assert provenance["model"]["logit_scale"] == 100.0 and provenance["model"]["logit_scale_source"] == "fixed"
    assert provenance["prompts"] == {"name_style": "sci", "templates_name": "photo", "templates": ["a photo of {c}."]}
    assert "Wilson" in provenance["metrics"]["top1_species"]
    assert set(provenance["software"]) >= {"cladebench", "pylance", "torch", "open_clip_torch"}
    predictions = loaded.predictions(run_path)
    assert predictions.num_rows == provenance["dataset"]["evaluated_rows"] == 60
    assert store.fingerprint_uuids(predictions.column("uuid").to_pylist()) == provenance["dataset"][
        "evaluated_fingerprint"]
    top1 = np.asarray(predictions.column("correct_top1"))
    assert loaded.metrics["top1_species"]["successes"] == int(top1.sum())
    assert provenance["label_set"]["size"] == len(provenance["label_set"]["labels"])


def test_within_restricts_rows_and_labels(embedded: tuple[Path, str]) -> None:
    path, model = embedded
    encoder = load_encoder(model, device="cpu")
    dataset = store.open_dataset(path)
    kingdom = dataset.to_table(columns=["kingdom"], limit=1).column(0)[0].as_py()
    predictions = zero_shot(dataset, encoder, ZeroShotConfig(within=f"kingdom={kingdom}"))
    assert all(label.startswith(kingdom + " ") for label in predictions.labels)
    kept = dataset.count_rows(filter=f"kingdom = '{kingdom}'")
    assert predictions.table.num_rows == kept


def test_embeddings_of_another_model_are_refused(embedded: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = embedded
    other = load_encoder("local-dir:" + str(write_tiny_model(tmp_path / "other", seed=9)), device="cpu")
    dataset = store.open_dataset(path)
    with pytest.raises(Exception, match="has no embedding column for model"):
        zero_shot(dataset, other, ZeroShotConfig())
    with pytest.raises(Exception, match="not comparable"):
        zero_shot(dataset, other, ZeroShotConfig(column="emb_tiny"))


def test_rows_without_embeddings_are_not_scored(tmp_path: Path, embedded: tuple[Path, str]) -> None:
    _, model = embedded
    world = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3)))
    table = world.to_table(12, seed=8)
    images = table.column("image").to_pylist()
    images[0] = b""
    table = table.set_column(table.column_names.index("image"), "image", pa.array(images, pa.large_binary()))
    path = tmp_path / "broken.lance"
    write_embedded(table, path, model)
    predictions = zero_shot(store.open_dataset(path), load_encoder(model, device="cpu"), ZeroShotConfig())
    assert predictions.table.num_rows == 11


def test_a_label_file_name_shared_by_homonyms_is_refused(tmp_path: Path) -> None:
    from cladebench.errors import CladebenchError
    from cladebench.tasks.common import label_set_from_file

    benchmark = [Lineage.from_names("Animalia", "Chordata", "Aves", "Suliformes", "Sulidae", "Morus", "bassanus"),
                 Lineage.from_names("Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Moraceae", "Morus", "alba"),
                 Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Fringillidae", "Fringilla")]
    names = tmp_path / "genera.txt"
    names.write_text("Morus\nFringilla\n")
    with pytest.raises(CladebenchError, match="'Morus' names 2 taxa"):
        label_set_from_file(names, "genus", benchmark)
    names.write_text("Fringilla\n")
    assert len(label_set_from_file(names, "genus", benchmark)) == 1
