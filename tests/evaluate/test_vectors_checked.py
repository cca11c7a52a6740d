"""Stored vectors that are not the recorded model's are refused, never scored under its name: a column changed
or swapped by another tool fails the checksum its sidecar records (exit 4), and a run that loads the model
encodes a few of the column's images again and refuses vectors another model made (exit 4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.cli import main
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> tuple[Path, str]:
    """24 photos embedded with the tiny model (``emb_tiny``) and with another one (``emb_other``)."""
    root = tmp_path_factory.mktemp("checked")
    other = "local-dir:" + str(write_tiny_model(root / "other-clip", seed=7))
    world = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3)))
    path = root / "world.lance"
    store.write_dataset(world.to_table(24, seed=5, image_format="jpeg"), path)
    for model, column in ((tiny_model, "emb_tiny"), (other, "emb_other")):
        embed_dataset(EmbedConfig(dataset=str(path), model=model, column=column, workers=0, device="cpu",
                                  progress=False))
    return path, tiny_model


def _copy(path: Path, tmp_path: Path) -> Path:
    shutil.copytree(path, tmp_path / path.name)
    return tmp_path / path.name


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_each_column_s_checksum_is_recorded_and_a_loaded_model_s_vectors_pass(
        embedded: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, model = embedded
    sidecar = json.loads((path / store.EMBEDDING_SIDECAR).read_text())
    assert {c: (len(e["vectors_sha256"]), e["vectors_rows"]) for c, e in sidecar.items()} == {
        "emb_tiny": (64, 24), "emb_other": (64, 24)}
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))  # no cached texts: the model loads
    code, err = _run(["eval", "zeroshot", str(path), "--model", model, "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    checked = RunRecord.read(tmp_path / "run" / "run.json").provenance["vectors_spot_check"]
    assert checked["column"] == "emb_tiny" and checked["rows"] == 4 and checked["min_cosine"] > 0.999


def test_columns_swapped_by_another_tool_fail_their_checksum(embedded: tuple[Path, str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(embedded[0], tmp_path)
    dataset = lance.dataset(str(path))
    dataset.alter_columns({"path": "emb_tiny", "name": "emb_swap"})
    dataset.alter_columns({"path": "emb_other", "name": "emb_tiny"})
    dataset.alter_columns({"path": "emb_swap", "name": "emb_other"})
    code, err = _run(["eval", "fewshot", str(path), "--column", "emb_tiny", "--out", str(tmp_path / "run"),
                      "--shots", "1"], capsys)
    assert code == 4 and len(err) == 1, err
    assert "column 'emb_tiny' does not hold the vectors embedding_models.json records" in err[0]
    assert "--overwrite" in err[0] and not (tmp_path / "run" / "run.json").exists()


def test_vectors_overwritten_in_place_fail_their_checksum(embedded: tuple[Path, str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(embedded[0], tmp_path)
    dataset = lance.dataset(str(path))
    halved = pa.table({"uuid": dataset.to_table(columns=["uuid"]).column("uuid"),
                       "emb_tiny": dataset.to_table(columns=["emb_tiny"]).column("emb_tiny")})
    scaled = [[2 * x for x in row] for row in halved.column("emb_tiny").to_pylist()]
    field = dataset.schema.field("emb_tiny")
    dataset.drop_columns(["emb_tiny"])
    lance.dataset(str(path)).merge(pa.table({"uuid": halved.column("uuid"),
                                             "emb_tiny": pa.array(scaled, field.type)},
                                            schema=pa.schema([pa.field("uuid", pa.string()), field])), "uuid")
    code, err = _run(["eval", "fewshot", str(path), "--column", "emb_tiny", "--out", str(tmp_path / "run"),
                      "--shots", "1"], capsys)
    assert code == 4 and len(err) == 1 and "checksum differs" in err[0], err


def test_another_model_s_vectors_under_the_model_s_name_are_refused_when_it_loads(
        embedded: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Written by another tool: emb_other's vectors under emb_tiny's metadata, and no sidecar to check."""
    source, model = embedded
    table = lance.dataset(str(source)).to_table()
    field = table.schema.field("emb_tiny")
    table = table.set_column(table.schema.get_field_index("emb_tiny"), field, table.column("emb_other"))
    lance.write_dataset(table.drop_columns(["emb_other"]), str(tmp_path / "relabelled.lance"))
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code, err = _run(["eval", "zeroshot", str(tmp_path / "relabelled.lance"), "--model", model, "--out",
                      str(tmp_path / "run")], capsys)
    assert code == 4 and len(err) == 1, err
    assert "column 'emb_tiny' does not hold" in err[0] and "encoding row uuid=" in err[0], err
    assert not (tmp_path / "run" / "run.json").exists()
