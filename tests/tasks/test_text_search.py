"""Text search through the vector index, and INQUIRE fullrank over it, against exact brute force."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import average_precision_score

from cladebench import store

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from cladebench.models import class_text_embeddings, load_encoder
from cladebench.models.tiny import write_tiny_model
from cladebench.store.search import vector_index_partitions
from cladebench.synthetic import WorldConfig, make_world
from cladebench.taxonomy import RANK_COLUMNS
from helpers.embedded import write_embedded

N = 90


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("search")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=6))
    world = make_world(WorldConfig(seed=4, names="generated", branching=(1, 1, 2, 1, 2, 2, 2)))
    table = world.to_table(N, seed=4, image_format="jpeg")
    rows = table.select(list(RANK_COLUMNS)).to_pylist()
    folders = ["{:05d}_{}".format(7 + sum(map(ord, r["species"])) % 9000,
                                  "_".join([*(r[c].capitalize() for c in RANK_COLUMNS[:-1]), r["species"]]))
               for r in rows]
    names = [f"train/{f}/{u}.jpg" for f, u in zip(folders, table.column("uuid").to_pylist(), strict=True)]
    table = table.append_column("inat24_file_name", pa.array(names))
    path = root / "gallery.lance"
    write_embedded(table, path, model)
    return path, model


def _exact_order(path: Path, model: str, text: str) -> tuple[list[str], np.ndarray]:
    rows = store.read(store.open_dataset(path), columns=["uuid", "emb_tiny"]).to_pylist()
    vectors = np.array([r["emb_tiny"] for r in rows], dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = class_text_embeddings(load_encoder(model, device="cpu"), [text], "raw")[0].astype(np.float64)
    similarity = vectors @ query
    order = np.argsort(-similarity, kind="stable")
    return [rows[i]["uuid"] for i in order], similarity[order]


def test_search_builds_the_index_and_returns_the_exact_nearest(gallery, capsys):
    path, model = gallery
    assert vector_index_partitions(store.open_dataset(path), "emb_tiny") is None
    name = store.read(store.open_dataset(path), columns=["scientific_name"]).column(0)[0].as_py()
    assert main(["search", str(path), name, "--model", model, "-k", "5", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "built an IVF_FLAT index" in captured.err
    assert vector_index_partitions(store.open_dataset(path), "emb_tiny") is not None
    lines = captured.out.strip().splitlines()
    assert len(lines) == 5
    uuids, similarity = _exact_order(path, model, name)
    # ~sqrt(90) partitions, all probed by Lance's default: the indexed answer is the exact one.
    assert [line.split()[2] for line in lines] == uuids[:5]
    assert [float(line.split()[1]) for line in lines] == pytest.approx(similarity[:5].tolist(), abs=1e-4)
    assert main(["search", str(path), "--model", model, "--device", "cpu"]) == 2  # neither text nor queries
    capsys.readouterr()
    # The text may also come after the options, and a filter that leaves nothing says so.
    assert main(["search", str(path), "--model", model, "-k", "5", "--device", "cpu", name]) == 0
    assert [line.split()[2] for line in capsys.readouterr().out.strip().splitlines()] == uuids[:5]
    assert main(["search", str(path), "--model", model, "--device", "cpu", "--where", "uuid = 'none'", name]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no hits" in captured.err
    with pytest.raises(SystemExit):
        main(["search", str(path), name, "--model", model, "--device", "cpu", "one-word-too-many"])


def test_fullrank_matches_inquire_formulas_on_the_exact_ranking(gallery, tmp_path, capsys):
    path, model = gallery
    table = store.read(store.open_dataset(path), columns=["uuid", "scientific_name", "inat24_file_name"])
    species = sorted(set(table.column("scientific_name").to_pylist()))[:3]
    queries = tmp_path / "inquire_queries_test.csv"
    with queries.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", "query_id", "query_text", "supercategory", "category", "iconic_group"])
        for i, name in enumerate(species):
            writer.writerow([i, 10 + i, name, "Species" if i else "Appearance", "Species", "Animalia"])
    annotations = tmp_path / "annotations.csv"
    positives: dict[int, set[str]] = {}
    with annotations.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "image_id", "image_path"])
        for number, row in enumerate(table.to_pylist()):
            if row["scientific_name"] in species:
                query_id = 10 + species.index(row["scientific_name"])
                writer.writerow([query_id, 1000 + number, row["inat24_file_name"].removesuffix(".jpg")])
                positives.setdefault(query_id, set()).add(row["uuid"])
    k = 10
    assert main(["search", str(path), "--model", model, "--queries", str(queries), "--annotations",
                 str(annotations), "--out", str(tmp_path / "full"), "-k", str(k), "--device", "cpu"]) == 0
    record = RunRecord.read(tmp_path / "full" / "run.json")
    assert record.task == "fullrank" and record.provenance["task"]["k"] == k
    expected = []
    for i, name in enumerate(species):
        uuids, similarity = _exact_order(path, model, name)
        relevant = np.array([u in positives[10 + i] for u in uuids[:k]])
        count = len(positives[10 + i])
        ap = (average_precision_score(relevant, similarity[:k]) if relevant.any() else 0.0) * relevant.sum() / min(
            count, k)
        expected.append(100 * ap)
    assert record.metrics[f"ap@{k}"]["value"] == pytest.approx(np.mean(expected), abs=1e-6)
    assert record.metrics[f"ap@{k}"]["n"] == 3
    assert f"supercategory=Species/ap@{k}" in record.metrics
    assert "run record" in capsys.readouterr().out


def test_fullrank_scores_a_short_list_as_inquire_does(gallery):
    """A filter leaving fewer than k rows: INQUIRE's compute_retrieval_metrics cuts at the list's length, so AP is
    normalised by min(annotated positives, rows) and precision divided by the rows; a filter leaving none is an
    error, not a row of zeros."""
    from cladebench.errors import CladebenchError
    from cladebench.tasks.text_search import fullrank

    path, model = gallery
    dataset = store.open_dataset(path)
    table = store.read(dataset, columns=["uuid", "scientific_name", "species", "inat24_file_name"])
    name = table.column("scientific_name")[0].as_py()
    epithet = table.column("species")[0].as_py()
    keys = [k for k, n in zip(table.column("inat24_file_name").to_pylist(), table.column("scientific_name").to_pylist(),
                              strict=True) if n == name]
    assert 1 < len(keys) < 50
    queries = pa.table({"query_id": [1], "query_text": [name]})
    # Two annotated positives the dataset does not hold: count_pos = rows + 2, as INQUIRE's len(pos_images).
    annotations = pa.table({"query_id": [1] * (len(keys) + 2), "inat24_file_name": [*keys, "x/a.jpg", "x/b.jpg"]})
    encoder = load_encoder(model, device="cpu")
    _, only = fullrank(dataset, encoder, queries, annotations, match_column="inat24_file_name", k=50,
                       where=f"species = '{epithet}'")
    scores = only["per_query"]
    assert scores.hits[0] == len(keys) and scores.cutoff[0] == len(keys) and scores.count_pos[0] == len(keys) + 2
    assert scores.precision[0] == pytest.approx(100.0)
    assert scores.ap[0] == pytest.approx(100.0)  # every row it could return is a positive: min(count_pos, c) = c
    assert scores.recall[0] == pytest.approx(100 * len(keys) / (len(keys) + 2))
    with pytest.raises(CladebenchError, match="nothing to rank"):
        fullrank(dataset, encoder, queries, annotations, match_column="inat24_file_name", k=50,
                 where="species = 'no-such-species'")


def test_fullrank_defaults_to_k_50_and_ranks_exactly(gallery, tmp_path):
    path, model = gallery
    table = store.read(store.open_dataset(path), columns=["scientific_name", "inat24_file_name"])
    name = table.column("scientific_name")[0].as_py()
    queries = tmp_path / "inquire_queries_val.csv"
    queries.write_text("query_id,query_text,supercategory,category,iconic_group\n"
                       f"7,{name},Species,Species,Animalia\n", encoding="utf-8")
    annotations = tmp_path / "annotations.csv"
    annotations.write_text("query_id,image_id,image_path\n7,1," + table.column("inat24_file_name")[0].as_py()
                           .removesuffix(".jpg") + "\n", encoding="utf-8")
    assert main(["search", str(path), "--model", model, "--queries", str(queries), "--annotations",
                 str(annotations), "--out", str(tmp_path / "full"), "--device", "cpu"]) == 0
    record = RunRecord.read(tmp_path / "full" / "run.json")
    assert record.provenance["task"]["k"] == 50 and record.config["k"] == 50
    assert "ap@50" in record.metrics and "ap@20" not in record.metrics
    assert record.provenance["task"]["ranking"].startswith("exact")
    assert record.predictions(tmp_path / "full" / "run.json").num_rows == 50
    assert main(["search", str(path), "--model", model, "--queries", str(queries), "--annotations",
                 str(annotations), "--out", str(tmp_path / "zero"), "-k", "0", "--device", "cpu"]) == 2
