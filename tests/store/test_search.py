"""Nearest-neighbour search: the indexed search against brute force, and both against plain numpy.

The reference here (``_numpy_top_k``) is independent of :mod:`cladebench.store.search`: it reads the whole table,
filters in numpy and ranks by cosine in float64.
"""

from __future__ import annotations

import doctest

import numpy as np
import pyarrow as pa
import pytest

import cladebench.store.search
from cladebench.errors import CladebenchError, SchemaError
from cladebench.store import append, create_vector_index, embedding_field, write_dataset
from cladebench.store.search import (
    brute_force_nearest,
    embedding_dim,
    nearest,
    unit_vectors,
    vector_index_partitions,
)

DIM = 12
ROWS = 600
GROUPS = ("alpha", "beta", "gamma")


def _table(vectors: np.ndarray, groups: list[str], start: int = 0, nulls: tuple[int, ...] = ()) -> pa.Table:
    n, dim = vectors.shape
    embeddings = pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), dim)
    if nulls:
        mask = np.zeros(n, dtype=bool)
        mask[list(nulls)] = True
        embeddings = pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), dim,
                                                       mask=pa.array(mask))
    schema = pa.schema([
        pa.field("uuid", pa.string(), nullable=False),
        pa.field("image", pa.large_binary(), nullable=False),
        pa.field("challenge_group", pa.string()),
        pa.field("score", pa.int64()),
        embedding_field("toy", dim, {"model": "toy-model"}),
    ])
    return pa.Table.from_arrays(
        [
            pa.array([f"u{i:05d}" for i in range(start, start + n)]),
            pa.array([b""] * n, pa.large_binary()),
            pa.array(groups),
            pa.array(np.arange(start, start + n) % 7, pa.int64()),
            embeddings,
        ],
        schema=schema,
    )


def _clustered(rng: np.random.Generator, n: int) -> tuple[np.ndarray, list[str]]:
    """Vectors around one centre per group, so groups are spatially separated (a filter changes the top-k)."""
    centres = rng.normal(size=(len(GROUPS), DIM)) * 2.0
    labels = rng.integers(len(GROUPS), size=n)
    vectors = centres[labels] + rng.normal(size=(n, DIM))
    return vectors, [GROUPS[i] for i in labels]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    rng = np.random.default_rng(7)
    vectors, groups = _clustered(rng, ROWS)
    dataset = write_dataset(_table(vectors, groups), tmp_path_factory.mktemp("search") / "toy.lance")
    dataset = create_vector_index(dataset, "emb_toy", num_partitions=8)
    # Queries near the "alpha" centre (so the unfiltered top-k is mostly alpha rows) plus a few random ones.
    alpha_rows = vectors[np.array(groups) == "alpha"]
    queries = np.concatenate([alpha_rows[:6] + rng.normal(size=(6, DIM)) * 0.3, rng.normal(size=(4, DIM)) * 3])
    return dataset, queries


def _numpy_top_k(dataset, queries: np.ndarray, k: int, group: str | None = None) -> list[list[str]]:
    table = dataset.to_table(columns=["uuid", "challenge_group", "emb_toy"])
    vectors = np.asarray(table.column("emb_toy").to_pylist(), dtype=np.float64)
    uuids = np.array(table.column("uuid").to_pylist())
    if group is not None:
        keep = np.array(table.column("challenge_group").to_pylist()) == group
        vectors, uuids = vectors[keep], uuids[keep]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    q = np.asarray(queries, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    similarity = q @ unit.T
    return [list(uuids[np.argsort(-row, kind="stable")[:k]]) for row in similarity]


def _per_query(result: pa.Table, num_queries: int) -> list[list[str]]:
    query_index = result.column("query_index").to_numpy()
    uuids = np.array(result.column("uuid").to_pylist(), dtype=object)
    return [list(uuids[query_index == i]) for i in range(num_queries)]


# --- agreement -----------------------------------------------------------------------------------


def test_brute_force_equals_independent_numpy(world):
    dataset, queries = world
    result = brute_force_nearest(dataset, "emb_toy", queries, k=10)
    assert _per_query(result, len(queries)) == _numpy_top_k(dataset, queries, 10)


def test_unit_vectors_are_every_row_in_order_with_the_rows_that_have_a_cosine(tmp_path):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(50, DIM))
    vectors[4] = 0
    dataset = write_dataset(_table(vectors, ["alpha"] * 50, nulls=(9,)), tmp_path / "unit.lance")
    uuids, unit, valid = unit_vectors(dataset, "emb_toy", batch_size=16)  # batches of 16: the rows in order
    assert uuids.to_pylist() == [f"u{i:05d}" for i in range(50)]
    assert unit.dtype == np.float32 and unit.shape == (50, DIM)
    assert np.flatnonzero(~valid).tolist() == [4, 9] and not unit[[4, 9]].any()
    expected = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(unit[valid], expected[valid], atol=1e-6)


def test_indexed_search_over_all_partitions_equals_brute_force(world):
    dataset, queries = world
    exact = brute_force_nearest(dataset, "emb_toy", queries, k=10)
    for nprobes in ("all", vector_index_partitions(dataset, "emb_toy")):
        indexed = nearest(dataset, "emb_toy", queries, k=10, nprobes=nprobes)
        assert indexed.column("uuid").to_pylist() == exact.column("uuid").to_pylist()
        assert indexed.column("query_index").to_pylist() == exact.column("query_index").to_pylist()
        np.testing.assert_allclose(indexed.column("distance").to_numpy(), exact.column("distance").to_numpy(),
                                   atol=1e-5)


def test_vector_index_partitions(world, tmp_path):
    dataset, _ = world
    assert vector_index_partitions(dataset, "emb_toy") == 8
    plain = write_dataset(_table(np.ones((3, DIM)), ["alpha"] * 3), tmp_path / "plain.lance")
    assert vector_index_partitions(plain, "emb_toy") is None


def test_one_probe_of_eight_misses_neighbours(world):
    # The index really is used: probing one partition of eight cannot find all true neighbours of every query.
    dataset, queries = world
    exact = _per_query(brute_force_nearest(dataset, "emb_toy", queries, k=50), len(queries))
    probed = _per_query(nearest(dataset, "emb_toy", queries, k=50, nprobes=1), len(queries))
    assert any(set(p) != set(e) for p, e in zip(probed, exact, strict=True))


def test_flat_search_without_index_equals_brute_force(world):
    dataset, queries = world
    flat = nearest(dataset, "emb_toy", queries, k=7, use_index=False)
    exact = brute_force_nearest(dataset, "emb_toy", queries, k=7)
    assert flat.column("uuid").to_pylist() == exact.column("uuid").to_pylist()


def test_brute_force_merges_top_k_across_small_batches(world):
    dataset, queries = world
    whole = brute_force_nearest(dataset, "emb_toy", queries, k=10)
    batched = brute_force_nearest(dataset, "emb_toy", queries, k=10, batch_size=7)
    assert batched.column("uuid").to_pylist() == whole.column("uuid").to_pylist()
    np.testing.assert_allclose(batched.column("distance").to_numpy(), whole.column("distance").to_numpy(), atol=1e-7)


def test_rows_appended_after_indexing_are_found(tmp_path):
    rng = np.random.default_rng(3)
    vectors, groups = _clustered(rng, 300)
    path = tmp_path / "grown.lance"
    dataset = create_vector_index(write_dataset(_table(vectors, groups), path), "emb_toy", num_partitions=4)
    new_vectors, new_groups = _clustered(rng, 100)
    dataset = append(_table(new_vectors, new_groups, start=300), path)
    queries = new_vectors[:5]  # each query's nearest row is itself, in the unindexed fragment
    indexed = nearest(dataset, "emb_toy", queries, k=5, nprobes="all")
    exact = brute_force_nearest(dataset, "emb_toy", queries, k=5)
    assert indexed.column("uuid").to_pylist() == exact.column("uuid").to_pylist()
    assert _per_query(indexed, 5) == _numpy_top_k(dataset, queries, 5)
    assert [hits[0] for hits in _per_query(indexed, 5)] == [f"u{300 + i:05d}" for i in range(5)]


# --- filters -------------------------------------------------------------------------------------


@pytest.mark.parametrize("search", ["indexed", "brute"])
def test_filter_is_applied_before_the_top_k(world, search):
    dataset, queries = world
    k = 10
    run = {
        "indexed": lambda **kw: nearest(dataset, "emb_toy", queries, nprobes="all", **kw),
        "brute": lambda **kw: brute_force_nearest(dataset, "emb_toy", queries, **kw),
    }[search]
    result = run(k=k, where="challenge_group = 'beta'", columns=("uuid", "challenge_group"))
    assert set(result.column("challenge_group").to_pylist()) == {"beta"}
    # The top-k within the filtered set: k hits per query, the same as numpy over the beta rows alone ...
    assert _per_query(result, len(queries)) == _numpy_top_k(dataset, queries, k, group="beta")
    # ... which is not what filtering the unfiltered top-k would give (alpha queries have few beta neighbours).
    unfiltered = run(k=k, columns=("uuid", "challenge_group"))
    postfiltered = unfiltered.filter(pa.compute.equal(unfiltered.column("challenge_group"), "beta"))
    assert postfiltered.num_rows < result.num_rows == k * len(queries)


@pytest.mark.parametrize("search", ["indexed", "brute"])
def test_numeric_filter(world, search):
    dataset, queries = world
    fn = nearest if search == "indexed" else brute_force_nearest
    result = fn(dataset, "emb_toy", queries[:3], k=5, where="score >= 5", columns=("uuid", "score"))
    assert result.num_rows == 15
    assert min(result.column("score").to_pylist()) >= 5


@pytest.mark.parametrize("search", ["indexed", "brute"])
def test_filter_with_fewer_rows_than_k(world, search):
    dataset, queries = world
    fn = nearest if search == "indexed" else brute_force_nearest
    few = fn(dataset, "emb_toy", queries[:2], k=10, where="uuid IN ('u00001', 'u00002', 'u00003')")
    assert sorted(few.column("uuid").to_pylist()) == ["u00001", "u00001", "u00002", "u00002", "u00003", "u00003"]
    none = fn(dataset, "emb_toy", queries[:2], k=10, where="uuid = 'no-such-row'")
    assert none.num_rows == 0
    assert none.column_names == ["query_index", "uuid", "distance", "cosine_similarity"]


# --- the result table ----------------------------------------------------------------------------


@pytest.mark.parametrize("search", ["indexed", "brute"])
def test_result_schema_order_and_similarity(world, search):
    dataset, queries = world
    fn = nearest if search == "indexed" else brute_force_nearest
    result = fn(dataset, "emb_toy", queries[:3], k=4, columns=("uuid", "challenge_group"))
    assert result.column_names == ["query_index", "uuid", "challenge_group", "distance", "cosine_similarity"]
    assert result.schema.field("query_index").type == pa.int32()
    assert result.schema.field("distance").type == pa.float32()
    assert result.schema.field("cosine_similarity").type == pa.float32()
    assert result.column("query_index").to_pylist() == [0] * 4 + [1] * 4 + [2] * 4
    distance = result.column("distance").to_numpy()
    similarity = result.column("cosine_similarity").to_numpy()
    np.testing.assert_allclose(similarity, 1 - distance, atol=1e-6)
    for i in range(3):
        assert np.all(np.diff(distance[4 * i: 4 * i + 4]) >= 0)
    # The similarity is the cosine of the raw stored vector with the raw query.
    stored = dataset.to_table(columns=["uuid", "emb_toy"])
    by_uuid = dict(zip(stored.column("uuid").to_pylist(), stored.column("emb_toy").to_pylist(), strict=True))
    for row in result.to_pylist():
        v, q = np.asarray(by_uuid[row["uuid"]]), queries[row["query_index"]]
        assert row["cosine_similarity"] == pytest.approx(v @ q / np.linalg.norm(v) / np.linalg.norm(q), abs=1e-5)


def test_single_vector_query_and_scale_invariance(world):
    dataset, queries = world
    one = nearest(dataset, "emb_toy", queries[0].tolist(), k=5)
    scaled = nearest(dataset, "emb_toy", queries[0] * 1000.0, k=5)
    assert one.column("query_index").to_pylist() == [0] * 5
    assert one.column("uuid").to_pylist() == scaled.column("uuid").to_pylist()


@pytest.mark.parametrize("use_index", [True, False])
def test_null_zero_and_nan_vectors_are_never_returned(tmp_path, use_index):
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(40, DIM))
    vectors[3] = 0.0
    vectors[4, 2] = np.nan
    dataset = write_dataset(_table(vectors, ["alpha"] * 40, nulls=(5,)), tmp_path / "holes.lance")
    if use_index:
        dataset = create_vector_index(dataset, "emb_toy", num_partitions=2)
    bad = {"u00003", "u00004", "u00005"}
    indexed = nearest(dataset, "emb_toy", rng.normal(size=(2, DIM)), k=40, nprobes="all", use_index=use_index)
    exact = brute_force_nearest(dataset, "emb_toy", rng.normal(size=(2, DIM)), k=40)
    for result in (indexed, exact):
        assert result.num_rows == 2 * 37
        assert not bad & set(result.column("uuid").to_pylist())
        assert np.isfinite(result.column("distance").to_numpy()).all()


# --- bad input -----------------------------------------------------------------------------------


@pytest.fixture(params=["indexed", "brute"])
def search_fn(request):
    return nearest if request.param == "indexed" else brute_force_nearest


def test_dimension_mismatch_names_both_dimensions(world, search_fn):
    dataset, _ = world
    with pytest.raises(SchemaError, match=r"dimension 5.*'emb_toy' has dimension 12"):
        search_fn(dataset, "emb_toy", np.ones((2, 5)))


def test_unknown_column_lists_embedding_columns(world, search_fn):
    dataset, queries = world
    with pytest.raises(SchemaError, match=r"'emb_nope' is not in the dataset.*\['emb_toy'\]"):
        search_fn(dataset, "emb_nope", queries)


def test_non_embedding_column_is_refused(world, search_fn):
    dataset, queries = world
    with pytest.raises(SchemaError, match=r"'score' is not an embedding column.*\['emb_toy'\]"):
        search_fn(dataset, "score", queries)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (np.zeros(DIM), "all zeros"),
        (np.full(DIM, np.nan), "NaN or infinite"),
        (np.ones((2, 2, DIM)), "1-D .* or 2-D"),
        (np.ones((0, DIM)), "no query vectors"),
        ([["a"] * DIM], "must be numbers"),
    ],
)
def test_bad_query_vectors(world, search_fn, query, message):
    dataset, _ = world
    with pytest.raises(CladebenchError, match=message):
        search_fn(dataset, "emb_toy", query)


def test_bad_arguments(world, search_fn):
    dataset, queries = world
    with pytest.raises(CladebenchError, match="k must be a positive integer"):
        search_fn(dataset, "emb_toy", queries, k=0)
    with pytest.raises(CladebenchError, match="clash"):
        search_fn(dataset, "emb_toy", queries, columns=("uuid", "distance"))
    with pytest.raises(SchemaError, match="'nope'"):
        search_fn(dataset, "emb_toy", queries, columns=("uuid", "nope"))
    with pytest.raises(CladebenchError, match="with filter 'no_such_column = 1'"):
        search_fn(dataset, "emb_toy", queries, where="no_such_column = 1")


def test_bad_nprobes_and_refine_factor(world):
    dataset, queries = world
    for nprobes in (0, -1, "some", True):
        with pytest.raises(CladebenchError, match="nprobes"):
            nearest(dataset, "emb_toy", queries, nprobes=nprobes)
    with pytest.raises(CladebenchError, match="refine_factor"):
        nearest(dataset, "emb_toy", queries, refine_factor=0)


def test_embedding_dim(world):
    dataset, _ = world
    assert embedding_dim(dataset, "emb_toy") == DIM


def test_module_docstring_example_runs():
    result = doctest.testmod(cladebench.store.search, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
