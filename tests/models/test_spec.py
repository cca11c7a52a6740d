"""One model resolver: every kind of name resolves, without torch, to the spec that the loader, the embedding
column and the run record all read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from cladebench.errors import UsageError
from cladebench.models import EndpointModel, build_model, model_kind, resolve_encoder, resolve_model
from cladebench.models.spec import ModelSpec, column_key
from cladebench.store.embeddings import PUBLISHED_EMBEDDING_COLUMNS, published_metadata

# Each kind of name, what its spec must say: kind, source, id, revision, default column, needs torch.
CASES = {
    "bioclip": ("clip", "hf-hub", "hf-hub:imageomics/bioclip", "ce901ab3c6a913f9e9ef94ce6d27761069f4f01c",
                "emb_bioclip", True),
    "hf-hub:BGLab/BioTrove-CLIP@abc123": ("clip", "hf-hub", "hf-hub:BGLab/BioTrove-CLIP", "abc123",
                                          "emb_biotrove_clip_abc123", True),
    "local-dir:/models/tiny-clip": ("clip", "local-dir", "local-dir:/models/tiny-clip", None, "emb_tinyclip", True),
    "ViT-B-16/openai": ("clip", "open_clip", "ViT-B-16/openai", None, "emb_vit_b_16_openai", True),
    "openai-compatible:Qwen2-VL@http://127.0.0.1:8000/v1": (
        "vlm", "openai-compatible", "openai-compatible:Qwen2-VL@http://127.0.0.1:8000/v1", None, None, False),
}


def test_every_kind_of_name_resolves_without_torch(tmp_path: Path) -> None:
    # The tiny model's name is a local-dir: name like any checkpoint folder; resolving it reads no file.
    tiny = f"local-dir:{tmp_path / 'tiny-clip-s0-64px'}"
    code = (
        "import json, sys\n"
        "from cladebench.models import resolve_model\n"
        f"names = {json.dumps([*CASES, tiny])}\n"
        "specs = {n: resolve_model(n) for n in names}\n"
        "out = {n: [s.kind, s.source, s.id, s.revision, s.column, s.needs_torch] for n, s in specs.items()}\n"
        "out['loaded'] = sorted(m for m in ('torch', 'open_clip', 'torchvision') if m in sys.modules)\n"
        "print(json.dumps(out))\n"
    )
    result = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    assert result.pop("loaded") == []
    for name, expected in CASES.items():
        assert tuple(result[name]) == expected, name
    assert result[tiny] == ["clip", "local-dir", tiny, None, "emb_tinyclips064px", True]


def test_the_spec_keeps_the_name_as_typed_but_equality_is_the_weights() -> None:
    typed = resolve_model("  BioCLIP ")
    assert typed.name == "BioCLIP" and typed.alias == "bioclip" and typed.column == "emb_bioclip"
    by_repo = resolve_model("hf-hub:imageomics/bioclip-2.5-vith14")
    by_alias = resolve_model("bioclip-2.5")
    # Same weights, same identity; the default column follows the spelling, as `embed` always named it.
    assert by_repo == by_alias.replace(alias=None)
    assert (by_alias.column, by_repo.column) == ("emb_bioclip2p5", "emb_bioclip2p5vith14")
    assert isinstance(by_alias, ModelSpec) and by_alias.needs_torch


def test_published_columns_are_their_models_default_columns() -> None:
    # Fine-Grained Challenges publishes emb_bioclip, emb_bioclip2, emb_bioclip2p5: the names `embed --model ALIAS`
    # writes, and the metadata that stands in for them names the model's resolved id.
    for column, alias in PUBLISHED_EMBEDDING_COLUMNS.items():
        spec = resolve_model(alias)
        assert spec.column == column
        assert published_metadata(column)["model"] == spec.id


def test_an_endpoint_is_a_vlm_spec_built_without_a_request() -> None:
    name = "openai-compatible:m@http://alice:s3cret@127.0.0.1:9/v1"
    spec = resolve_model(name)
    assert (spec.kind, spec.column, spec.needs_torch) == ("vlm", None, False)
    model = build_model(spec)  # nothing listens on port 9: building asks nothing
    assert isinstance(model, EndpointModel) and model.spec is spec
    assert model_kind(model) == "vlm" and model.model_id == name
    assert model.endpoint.name == "m" and model.endpoint.display_url == "http://127.0.0.1:9/v1"
    assert model.describe() == {"model_id": name, "revision": None, "kind": "vlm"}
    with pytest.raises(UsageError, match="VLM behind an endpoint") as info:
        resolve_encoder(name)
    assert "s3cret" not in str(info.value)
    with pytest.raises(UsageError, match="no revision to pin"):
        resolve_model(name, revision="v2")


def test_the_tiny_model_is_built_from_its_spec(tiny_model: str) -> None:
    pytest.importorskip("open_clip")
    spec = resolve_model(tiny_model)
    encoder = build_model(spec, device="cpu")
    assert encoder.spec == spec and encoder.model_id == spec.id and model_kind(encoder) == "clip"
    assert encoder.describe()["revision"].startswith("sha256:")  # what was loaded: a digest of the files
    assert spec.column == "emb_tinyclip"


def test_a_model_without_a_spec_is_an_image_text_encoder() -> None:
    class Double:
        model_id, revision = "double", None

        def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
            return np.zeros((len(texts), 4), np.float32)

    assert model_kind(Double()) == "clip"


def test_column_key_matches_what_embed_named_columns() -> None:
    assert [column_key(n) for n in ("bioclip", "bioclip-2", "bioclip-2.5", "hf-hub:org/My-Model",
                                    "local-dir:/models/tiny-clip/", "ViT-B-16//data/w.pt", "!!!")] == [
        "bioclip", "bioclip2", "bioclip2p5", "mymodel", "tinyclip", "vit_b_16_data_wppt", "model"]


def _run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    code = ("import sys\nfrom cladebench.cli import main\ncode = main(sys.argv[1:])\n"
            "loaded = [m for m in ('torch', 'open_clip') if m in sys.modules]\n"
            "print('LOADED', loaded, file=sys.stderr)\nsys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**_env(), "HF_HUB_OFFLINE": "1"})


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small dataset with a published-style emb_bioclip column (plain vectors, no field metadata): two genera of
    twelve rows each, their vectors clustered by genus."""
    from cladebench.synthetic import WorldConfig, make_world

    table = make_world(WorldConfig(seed=3)).to_table(24, seed=3)
    genus = np.array([f"Genus{i % 2}" for i in range(table.num_rows)])
    table = table.set_column(table.column_names.index("genus"), "genus", pa.array(genus))
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(2, 16))
    vectors = centres[np.arange(table.num_rows) % 2] + 0.05 * rng.normal(size=(table.num_rows, 16))
    table = table.append_column("emb_bioclip", pa.array(list(vectors.astype(np.float32)), pa.list_(pa.float32())))
    path = tmp_path_factory.mktemp("published") / "d.lance"
    lance.write_dataset(table, path)  # as published: not through cladebench's store
    return path


def test_the_record_and_the_column_come_from_one_resolution(published: Path, tmp_path: Path, monkeypatch) -> None:
    from cladebench.cli import main
    from cladebench.evaluate.record import RunRecord
    from cladebench.models import registry

    calls: list[str] = []
    original = registry.resolve_model

    def counting(name: str, revision: str | None = None) -> ModelSpec:
        calls.append(name)
        return original(name, revision)

    monkeypatch.setattr(registry, "resolve_model", counting)
    out = tmp_path / "run"
    code = main(["eval", "retrieval", str(published), "--model", "BioCLIP", "--rank", "genus",
                 "--group-by", "none", "--out", str(out)])
    assert code == 0
    assert calls == ["BioCLIP"]  # resolved once, for the column lookup and the record alike
    spec = original("BioCLIP")
    model = RunRecord.read(out).provenance["model"]
    assert (model["id"], model["revision"], model["named_by"]) == (spec.id, spec.revision, "--model")
    assert model["image_embeddings"]["column"] == spec.column == "emb_bioclip"
    assert model["image_embeddings"]["model"] == spec.id


def test_an_unknown_model_exits_2_with_did_you_mean_before_torch(published: Path, tmp_path: Path) -> None:
    for args in (["embed", str(published), "--model", "bioclp"],
                 ["eval", "retrieval", str(published), "--model", "bioclp", "--out", str(tmp_path / "o")]):
        result = _run_cli(args)
        assert result.returncode == 2, result.stderr
        assert "unknown model 'bioclp'" in result.stderr and "Did you mean 'bioclip'?" in result.stderr
        assert "LOADED []" in result.stderr
    assert not (tmp_path / "o").exists()
