"""Linear CKA against the kernel (Gram matrix) formula and its invariances; comparing columns on shared splits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.evaluate.compare_columns import compare_columns, linear_cka

DIM = 16
RANKS = ("kingdom", "phylum", "class", "order", "family", "genus", "species")


def gram_cka(x: np.ndarray, y: np.ndarray) -> float:
    """CKA from n x n Gram matrices: HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), HSIC = tr(K H L H) / (n - 1)^2."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, lam = x @ x.T, y @ y.T

    def hsic(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.trace(a @ h @ b @ h)) / (n - 1) ** 2

    return hsic(k, lam) / np.sqrt(hsic(k, k) * hsic(lam, lam))


def random_rotation(dim: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))


def test_linear_cka_matches_the_gram_matrix_formula() -> None:
    rng = np.random.default_rng(0)
    for n, dx, dy in ((50, 8, 8), (40, 5, 12), (30, 20, 3)):
        x = rng.normal(size=(n, dx)) + rng.normal(size=dx)
        y = x[:, :1] @ rng.normal(size=(1, dy)) + rng.normal(size=(n, dy))
        assert linear_cka(x, y) == pytest.approx(gram_cka(x, y), rel=1e-9)
        assert linear_cka(x, y) == pytest.approx(linear_cka(y, x), rel=1e-12)
        assert 0.0 <= linear_cka(x, y) <= 1.0


def test_linear_cka_invariances() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, DIM)) @ rng.normal(size=(DIM, DIM))
    y = np.tanh(x @ rng.normal(size=(DIM, 10)))
    base = linear_cka(x, y)
    assert linear_cka(x, x) == pytest.approx(1.0)
    assert linear_cka(x, 7.5 * x @ random_rotation(DIM, rng) + 3.0) == pytest.approx(1.0)
    assert linear_cka(x @ random_rotation(DIM, rng), y) == pytest.approx(base, rel=1e-9)
    assert linear_cka(0.01 * x, 40.0 * y) == pytest.approx(base, rel=1e-9)
    # Not invariant to anisotropic scaling: the test would catch a normalisation per feature.
    stretch = np.ones(DIM)
    stretch[0] = 25.0
    assert abs(linear_cka(x * stretch, y) - base) > 1e-3
    assert linear_cka(x, rng.normal(size=(200, 10))) < 0.2
    with pytest.raises(ValueError, match="same rows"):
        linear_cka(x, y[:-1])
    with pytest.raises(ValueError, match="constant"):
        linear_cka(x, np.ones((200, 3)))


def write_three_columns(path: Path, seed: int = 0) -> dict[str, Any]:
    """emb_a: planted classes; emb_b: a rotated, scaled copy of emb_a; emb_c: noise. One row lacks emb_b."""
    rng = np.random.default_rng(seed)
    n_classes = 5
    means = rng.normal(size=(n_classes, DIM))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    uuids, source_ids, names, vectors = [], [], [], []
    for c in range(n_classes):
        for g in range(7):
            for i in range(int(rng.integers(1, 3))):
                uuids.append(f"{c}-{g}-{i}")
                source_ids.append(f"obs-{c}-{g}")
                names.append(("Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Rosaceae", f"Rosa{c}", "alba"))
                vectors.append(means[c] + 0.1 * rng.normal(size=DIM))
    a = np.asarray(vectors, dtype=np.float32)
    b = (3.0 * a @ random_rotation(DIM, rng)).astype(np.float32)
    noise = rng.normal(size=a.shape).astype(np.float32)
    missing = np.zeros(len(a), dtype=bool)
    missing[0] = True
    table = pa.table({"uuid": uuids, "image": pa.array([b"x"] * len(uuids), pa.large_binary()),
                      **{rank: [n[i] for n in names] for i, rank in enumerate(RANKS)}, "source_id": source_ids})
    for key, values, mask in (("a", a, None), ("b", b, missing), ("c", noise, None)):
        field = store.embedding_field(key, DIM, {"model": f"model-{key}"})
        array = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), DIM,
                                                  mask=None if mask is None else pa.array(mask))
        table = table.append_column(field, array)
    store.write_dataset(table, path)
    return {"a": a[~missing], "b": b[~missing], "c": noise[~missing], "rows": int((~missing).sum())}


def test_compare_columns_scores_every_column_on_identical_splits(tmp_path: Path) -> None:
    planted = write_three_columns(tmp_path / "three.lance")
    dataset = store.open_dataset(tmp_path / "three.lance")
    result = compare_columns(dataset, shots=(1, 3), repetitions=4, seed=3)
    assert result.columns == ("emb_a", "emb_b", "emb_c")
    assert result.models == {"emb_a": "model-a", "emb_b": "model-b", "emb_c": "model-c"}
    assert result.rows == planted["rows"]  # the row without emb_b is left out for every column
    # SimpleShot is invariant to rotation and scale, so on the same splits a and b agree repetition by repetition.
    for name in ("simpleshot_1shot", "simpleshot_3shot"):
        assert result.accuracy["emb_a"][name]["per_repetition"] == pytest.approx(
            result.accuracy["emb_b"][name]["per_repetition"])
    assert result.accuracy["emb_a"]["simpleshot_3shot"]["value"] > 0.9
    assert result.accuracy["emb_c"]["simpleshot_3shot"]["value"] < 0.6
    assert result.cka["emb_a"]["emb_b"] == pytest.approx(1.0) == result.cka["emb_b"]["emb_a"]
    assert result.cka["emb_a"]["emb_c"] == pytest.approx(linear_cka(planted["a"], planted["c"]))
    assert result.cka["emb_a"]["emb_c"] < 0.5
    assert result.split["seed"] == 3 and result.split["sampling_unit"] == "source_id"
    again = compare_columns(dataset, ["emb_c", "emb_b", "emb_a"], shots=(1, 3), repetitions=4, seed=3)
    assert again.split["fingerprint"] == result.split["fingerprint"]
    assert again.accuracy["emb_a"] == result.accuracy["emb_a"]
    other_seed = compare_columns(dataset, shots=(1, 3), repetitions=4, seed=4)
    assert other_seed.split["fingerprint"] != result.split["fingerprint"]
    json.dumps(result.to_dict())


def test_compare_columns_uses_bioclip_simpleshot_by_default(tmp_path: Path) -> None:
    """Raw vectors whose norms spread (log-norm sd 0.4) and the same vectors unscaled: BioCLIP's protocol (the
    default) normalises each vector first, so both columns score identically; BioBench's variant does not."""
    from helpers.planted_embeddings import spread_norm_problem

    data, clean = spread_norm_problem(seed=3, log_norm_sd=0.4)
    n = len(data["uuids"])
    table = pa.table({"uuid": data["uuids"], "image": pa.array([b"x"] * n, pa.large_binary()),
                      **{rank: [("Animalia", "Chordata", "Aves", "Passeriformes", "Fam", f"Genus{label[-2:]}",
                                 "alba")[i] for label in data["labels"]] for i, rank in enumerate(RANKS)},
                      "source_id": data["groups"]})
    dim = clean.shape[1]
    for key, values in (("raw", data["vectors"]), ("clean", clean)):
        field = store.embedding_field(key, dim, {"model": f"model-{key}"})
        table = table.append_column(field, pa.FixedSizeListArray.from_arrays(
            pa.array(values.astype(np.float32).ravel()), dim))
    store.write_dataset(table, tmp_path / "norms.lance")
    dataset = store.open_dataset(tmp_path / "norms.lance")
    default = compare_columns(dataset, shots=(5,), repetitions=3, seed=1)
    assert "BioCLIP" in default.methods["simpleshot"] and list(default.methods) == ["simpleshot"]
    assert (default.accuracy["emb_raw"]["simpleshot_5shot"]["per_repetition"]
            == pytest.approx(default.accuracy["emb_clean"]["simpleshot_5shot"]["per_repetition"], abs=1e-12))
    variant = compare_columns(dataset, shots=(5,), repetitions=3, seed=1, methods=("simpleshot-biobench",))
    assert "BioBench" in variant.methods["simpleshot-biobench"]
    raw = variant.accuracy["emb_raw"]["simpleshot-biobench_5shot"]["value"]
    assert raw < variant.accuracy["emb_clean"]["simpleshot-biobench_5shot"]["value"] - 0.05
    assert json.loads(json.dumps(default.to_dict()))["methods"] == default.methods


def test_compare_columns_reads_a_column_whose_name_needs_quoting(tmp_path: Path) -> None:
    """Datasets written by other tools may name a column ``emb_bio-clip``: the shared-rows filter quotes it."""
    import lance

    write_three_columns(tmp_path / "three.lance")
    table = lance.dataset(str(tmp_path / "three.lance")).to_table()
    table = table.rename_columns([("emb_bio-clip" if name == "emb_b" else name) for name in table.column_names])
    lance.write_dataset(table, str(tmp_path / "odd.lance"))
    result = compare_columns(store.open_dataset(tmp_path / "odd.lance"), ["emb_a", "emb_bio-clip"], shots=(1,),
                             repetitions=2, seed=0)
    assert set(result.columns) == {"emb_a", "emb_bio-clip"}
