"""The app's nearest neighbours from the unit vectors it keeps in memory: the exact scan's answer, read once per
dataset version and column, a new version read afresh, and the memory bound kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.serve import vectors
from cladebench.serve.state import ServeState
from cladebench.store.search import brute_force_nearest

DIM = 16


def _table(rows: int, seed: int, start: int = 0, columns: tuple[str, ...] = ("emb_a",)) -> pa.Table:
    """``rows`` rows whose vectors are random (row 5 all zeros, row 7 null: neither has a cosine), in 7 genera."""
    rng = np.random.default_rng(seed)
    data: dict[str, pa.Array] = {
        "uuid": pa.array([f"u{start + i}" for i in range(rows)]),
        "image": pa.array([b""] * rows, pa.large_binary()),
        "genus": pa.array([f"g{(start + i) % 7}" for i in range(rows)]),
    }
    fields = [pa.field("uuid", pa.string()), pa.field("image", pa.large_binary()), pa.field("genus", pa.string())]
    for column in columns:
        values = rng.standard_normal((rows, DIM)).astype(np.float32)
        null = np.zeros(rows, dtype=bool)
        if start == 0 and rows > 7:
            values[5] = 0
            null[7] = True
        data[column] = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), DIM, mask=pa.array(null))
        fields.append(store.embedding_field(column, DIM, {"model": "toy"}))
    return pa.table(data).cast(pa.schema(fields))


def _state(path: Path) -> ServeState:
    return ServeState(uri=str(path), dataset=store.open_dataset(path))


def _exact(state: ServeState, column: str, uuid: str, k: int, where: str | None = None) -> list[tuple[str, float]]:
    """The exact scan's answer on the state's own version (the row itself left out)."""
    vector = vectors.row_vector(state, column, uuid)
    table = brute_force_nearest(state.dataset, column, vector, k=k + 1, where=where, columns=["uuid"])
    return [(u, s) for u, s in zip(table.column("uuid").to_pylist(), table.column("cosine_similarity").to_pylist(),
                                   strict=True) if u != uuid][:k]


def _found(found: vectors.Neighbours | None) -> list[tuple[str, float]]:
    assert found is not None and not found.indexed
    return [(h["uuid"], h["cosine_similarity"]) for h in found.hits]


def _same(cached: list[tuple[str, float]], exact: list[tuple[str, float]]) -> None:
    assert [u for u, _ in cached] == [u for u, _ in exact]
    assert [s for _, s in cached] == pytest.approx([s for _, s in exact], abs=1e-5)


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The columns read into memory, in order."""
    reads: list[str] = []
    real = vectors.unit_vectors

    def counting(dataset, column, **kwargs):
        reads.append(column)
        return real(dataset, column, **kwargs)

    monkeypatch.setattr(vectors, "unit_vectors", counting)
    return reads


def test_neighbours_from_memory_are_the_exact_scan_and_the_column_is_read_once(tmp_path: Path,
                                                                               counted_reads: list[str]) -> None:
    path = tmp_path / "d.lance"
    store.write_dataset(_table(300, seed=0), path)
    state = _state(path)
    for uuid in ("u10", "u11", "u299"):
        _same(_found(vectors.like(state, "emb_a", uuid, k=12)), _exact(state, "emb_a", uuid, 12))
    # A filter is Lance's, as in the scan; a k above the rows that pass gives them all; no row without a cosine.
    _same(_found(vectors.like(state, "emb_a", "u10", k=12, where="genus = 'g3'")),
          _exact(state, "emb_a", "u10", 12, where="genus = 'g3'"))
    everything = _found(vectors.like(state, "emb_a", "u10", k=1000))
    _same(everything, _exact(state, "emb_a", "u10", 1000))
    assert len(everything) == 300 - 3 and not {"u5", "u7", "u10"} & {u for u, _ in everything}
    assert vectors.like(state, "emb_a", "u5", k=3) is None and vectors.like(state, "emb_a", "u7", k=3) is None
    assert _found(vectors.like(state, "emb_a", "u10", k=5, where="genus = 'none'")) == []
    assert counted_reads == ["emb_a"]  # every search above after the first took the vectors from memory


def test_a_new_version_of_the_dataset_is_read_afresh(tmp_path: Path, counted_reads: list[str]) -> None:
    path = tmp_path / "d.lance"
    store.write_dataset(_table(200, seed=0), path)
    old = _state(path)
    before = _found(vectors.like(old, "emb_a", "u10", k=12))
    # New rows, one of them the very vector of u10 scaled: the nearest neighbour of u10 from this version on.
    added = _table(50, seed=1, start=200)
    u10 = old.dataset.to_table(columns=["emb_a"], filter="uuid = 'u10'").column(0)[0].values.to_numpy()
    values = added.column("emb_a").combine_chunks().values.to_numpy(zero_copy_only=False).reshape(50, DIM).copy()
    values[0] = 3 * u10
    added = added.set_column(3, added.schema.field("emb_a"),
                             pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), DIM))
    store.append(added, path)

    new = _state(path)
    assert new.version > old.version
    after = _found(vectors.like(new, "emb_a", "u10", k=12))
    assert after[0][0] == "u200" and after[0][1] == pytest.approx(1.0)
    _same(after, _exact(new, "emb_a", "u10", 12))
    # The server that opened the old version still answers for it, from its memory.
    assert _found(vectors.like(old, "emb_a", "u10", k=12)) == before
    # A server moved on to the new version does not answer from the old version's vectors.
    old.dataset = store.open_dataset(path)
    _same(_found(vectors.like(old, "emb_a", "u10", k=12)), after)
    assert counted_reads == ["emb_a"] * 3


def test_memory_stays_within_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       counted_reads: list[str]) -> None:
    path = tmp_path / "d.lance"
    store.write_dataset(_table(100, seed=0, columns=("emb_a", "emb_b")), path)
    state = _state(path)
    one_column = 100 * (4 * DIM + 1)
    monkeypatch.setattr(vectors, "VECTOR_MEMORY", one_column)  # room for one column at a time
    for column in ("emb_a", "emb_b", "emb_a"):
        _same(_found(vectors.like(state, column, "u10", k=8)), _exact(state, column, "u10", 8))
    kept = state.memo[("unit-vectors",)]
    assert sum(v.nbytes for v in kept.values()) <= one_column and list(kept) == [(state.version, "emb_a")]
    assert counted_reads == ["emb_a", "emb_b", "emb_a"]  # the least recently searched column made room

    # A column larger than the bound alone is never held: the exact scan answers, the same.
    monkeypatch.setattr(vectors, "VECTOR_MEMORY", one_column - 1)
    fresh = _state(path)
    _same(_found(vectors.like(fresh, "emb_a", "u10", k=8)), _exact(fresh, "emb_a", "u10", 8))
    _same(_found(vectors.like(fresh, "emb_a", "u11", k=8)), _exact(fresh, "emb_a", "u11", 8))
    assert counted_reads == ["emb_a", "emb_b", "emb_a"]
    assert fresh.memo[("unit-vectors",)] == {(fresh.version, "emb_a"): None}


@pytest.mark.parametrize(("query", "said"), [
    (np.ones(DIM + 4), "dimension 20, but column 'emb_a' has dimension 16"),
    (np.zeros(DIM), "all zeros"),
    (np.full(DIM, np.nan), "NaN or infinite"),
])
def test_a_query_the_column_cannot_compare_is_refused_as_by_the_scan(tmp_path: Path, query: np.ndarray,
                                                                      said: str) -> None:
    """A text encoded by a model of another width (serve --model naming another model than the column's), or a
    vector with no cosine, is the one-line error the exact scan gives, never a crash of the page or NaN hits."""
    from cladebench.errors import CladebenchError

    path = tmp_path / "d.lance"
    store.write_dataset(_table(40, seed=0), path)
    state = _state(path)
    with pytest.raises(CladebenchError, match=said):
        brute_force_nearest(state.dataset, "emb_a", query, k=3)
    with pytest.raises(CladebenchError, match=said):
        vectors.search(state, "emb_a", query, k=3)
