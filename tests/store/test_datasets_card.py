"""Other tools open what cladebench writes: Hugging Face ``datasets`` (through the card), LanceDB, DuckDB, pyarrow.

Each test opens a dataset written by :func:`cladebench.store.write_dataset` with the other tool itself. The images
are WebP, as the Fine-Grained Challenges store them: ``datasets`` guesses ``RIFF`` bytes to be a video unless the
card says ``image`` holds images.
"""

from __future__ import annotations

import io
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from cladebench import store
from cladebench.store.datasets_card import CARD_MARKER, CARD_NAME, datasets_card

SIZES = [(20, 12), (16, 16), (9, 30), (24, 8)]


def _webp(size: tuple[int, int], shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (shade, 255 - shade, 90)).save(buffer, format="WEBP")
    return buffer.getvalue()


def _table(start: int = 0) -> pa.Table:
    n = len(SIZES)
    vectors = np.random.default_rng(start).normal(size=(n, 3)).astype(np.float32)
    table = pa.table({
        "uuid": [f"u{start + i}" for i in range(n)],
        "image": pa.array([_webp(size, 40 * i) for i, size in enumerate(SIZES)], pa.large_binary()),
        "image_format": ["webp"] * n,
        "species": ["Genus alpha", "Genus beta", "Genus alpha", "Other gamma"],
        "latitude": [10.5, None, -3.25, 0.0],
        "observed_on": pa.array([None, 19000, 19001, 19002], pa.date32()),
        "seen_in_training": [["bioclip"], [], None, ["a", "b"]],
        "challenge_group": ["x", "x", "y", "y"],
    })
    field = store.embedding_field("toy", 3, {"model": "toy-model"})
    return table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 3))


@pytest.fixture
def written(tmp_path: Path) -> Path:
    path = tmp_path / "webp.lance"
    store.write_dataset(_table(), path)
    return path


def _load(path: Path):
    datasets = pytest.importorskip("datasets")
    return datasets.load_dataset(str(path), split="train", cache_dir=str(path.parent / "hf-cache"))


def test_load_dataset_reads_the_webp_image_column_as_images(written):
    datasets = pytest.importorskip("datasets")
    loaded = _load(written)
    assert isinstance(loaded.features["image"], datasets.Image)  # not Video (the RIFF guess)
    assert loaded.num_rows == len(SIZES)
    by_uuid = {row["uuid"]: row for row in loaded}
    for i, size in enumerate(SIZES):
        image = by_uuid[f"u{i}"]["image"]
        assert image.format == "WEBP" and image.size == size
    # Every other column is what datasets infers from its Arrow type, values intact.
    inferred = datasets.Features.from_arrow_schema(store.open_dataset(written).schema)
    for name in loaded.column_names:
        if name != "image":
            assert loaded.features[name] == inferred[name], name
    assert by_uuid["u1"]["latitude"] is None and by_uuid["u0"]["seen_in_training"] == ["bioclip"]
    assert by_uuid["u3"]["emb_toy"] == pytest.approx(_table().column("emb_toy")[3].as_py())


def test_the_card_follows_the_columns_and_a_column_added_elsewhere_is_left_out(written):
    card_path = written / CARD_NAME
    assert card_path.read_text().startswith(CARD_MARKER)
    dataset = store.open_dataset(written)
    # A column another tool adds (Lance itself): the card does not name it, so datasets loads the others.
    dataset.add_columns({"doubled": "latitude * 2"})
    loaded = _load(written)
    assert "doubled" not in loaded.column_names and "image" in loaded.column_names
    # cladebench's next write describes it.
    store.write_dataset(_table(10), written, mode="append")
    assert "doubled" in card_path.read_text()
    assert "doubled" in _load(written).column_names


def test_a_card_cladebench_did_not_write_is_left_as_it_is(written):
    card_path = written / CARD_NAME
    card_path.write_text("configs:\n- config_name: default\n")  # someone's own card
    store.write_dataset(_table(10), written, mode="append")
    assert card_path.read_text() == "configs:\n- config_name: default\n"


def test_a_dataset_without_a_card_still_opens(tmp_path):
    """Written before the card existed (or by Lance alone): cladebench reads it as ever."""
    path = tmp_path / "old.lance"
    lance.write_dataset(_table(), str(path))
    assert not (path / CARD_NAME).exists()
    dataset = store.open_dataset(path)
    assert dataset.count_rows() == len(SIZES) and store.fingerprint(dataset)


def test_a_subset_has_its_own_card(written, tmp_path):
    out = tmp_path / "part.lance"
    store.subset(str(written), str(out), where="challenge_group = 'y'", columns=["uuid", "image", "challenge_group"])
    card = (out / CARD_NAME).read_text()
    assert "emb_toy" not in card and "dtype: image" in card
    assert _load(out).num_rows == 2


def test_a_type_the_card_cannot_describe_means_no_card():
    schema = pa.schema([("uuid", pa.string()), ("image", pa.large_binary()),
                        ("tags", pa.map_(pa.string(), pa.int64()))])
    assert datasets_card(schema) is None


def test_lancedb_opens_it_and_searches_the_embedding_column(written):
    lancedb = pytest.importorskip("lancedb")
    table = lancedb.connect(str(written.parent)).open_table(written.name.removesuffix(".lance"))
    assert table.count_rows() == len(SIZES)
    assert table.schema.field("image").type == pa.large_binary()
    query = _table().column("emb_toy")[2].as_py()
    hits = table.search(query, vector_column_name="emb_toy").metric("cosine").limit(1).to_arrow()
    assert hits.column("uuid").to_pylist() == ["u2"]


def test_duckdb_queries_it(written):
    duckdb = pytest.importorskip("duckdb")
    dataset = store.open_dataset(written)  # DuckDB scans it as an Arrow dataset  # noqa: F841
    counts = duckdb.sql("SELECT challenge_group, count(*) FROM dataset GROUP BY 1 ORDER BY 1").fetchall()
    assert counts == [("x", 2), ("y", 2)]
    assert duckdb.sql("SELECT octet_length(image) > 0 FROM dataset WHERE uuid = 'u0'").fetchall() == [(True,)]


def test_pyarrow_reads_it_as_an_arrow_dataset(written):
    import pyarrow.compute as pc
    import pyarrow.dataset as pds

    dataset = store.open_dataset(written)
    assert isinstance(dataset, pds.Dataset)
    table = dataset.to_table(columns=["uuid", "emb_toy"], filter=pc.field("challenge_group") == "y")
    assert sorted(table.column("uuid").to_pylist()) == ["u2", "u3"]
    field = dataset.schema.field("emb_toy")
    assert field.type == pa.list_(pa.float32(), 3) and store.embedding_metadata(field)["model"] == "toy-model"


def test_a_new_embedding_column_is_in_the_card(written):
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.models.tiny import write_tiny_model

    model = "local-dir:" + str(write_tiny_model(written.parent / "tiny", seed=0))
    embed_dataset(EmbedConfig(dataset=str(written), model=model, column="emb_tiny", workers=0, device="cpu",
                              progress=False))
    assert "name: emb_tiny" in (written / CARD_NAME).read_text()
    loaded = _load(written)
    assert "emb_tiny" in loaded.column_names and loaded.features["image"].__class__.__name__ == "Image"
