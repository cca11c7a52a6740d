"""Encoders: name resolution, offline behaviour, the tiny checkpoint, preprocessing, the text cache.

Everything runs offline on a tiny open_clip CLIP with seeded random weights, written to disk and
loaded through the same ``local-dir:`` path as BioCLIP. Tests that need torch skip without it.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cladebench.errors import CladebenchError, SchemaError, UnknownNameError, UsageError
from cladebench.models import (
    MODELS,
    ModelLoadError,
    ModelSpec,
    ModelUnavailableError,
    Preprocessing,
    class_text_embeddings,
    register_model,
    resolve_encoder,
    resolve_model,
    text_cache_key,
)
from cladebench.models.text import _encode_classes

PINS = {
    "bioclip": ("hf-hub:imageomics/bioclip", "ce901ab3c6a913f9e9ef94ce6d27761069f4f01c"),
    "bioclip-2": ("hf-hub:imageomics/bioclip-2", "2957b322090f9cb17ae72c71981c7218a28d81e0"),
    "bioclip-2.5": ("hf-hub:imageomics/bioclip-2.5-vith14", "191d741545e4c741cdef4b22c6eb69c945c1e592"),
}


# --- resolution (no torch) -----------------------------------------------------------------------


@pytest.mark.parametrize("alias", sorted(PINS))
def test_bioclip_aliases_are_pinned(alias):
    model_id, commit = PINS[alias]
    spec = resolve_model(alias)
    assert (spec.id, spec.revision, spec.source, spec.alias) == (model_id, commit, "hf-hub", alias)
    assert spec.open_clip_name == model_id and spec.pretrained is None
    # The same repo named directly keeps the pin: one spelling, one identity.
    assert resolve_model(model_id) == spec.replace(alias=None)
    # A revision passed by the caller wins over the pin, both as an argument and after "@".
    assert resolve_model(alias, revision="main").revision == "main"
    assert resolve_model(f"{model_id}@v1").revision == "v1"


def test_other_aliases():
    expected = {
        "clip-vit-b-16": ("ViT-B-16/openai", "ViT-B-16", "openai", "open_clip"),
        "clip-vit-l-14": ("ViT-L-14/openai", "ViT-L-14", "openai", "open_clip"),
        "biotrove-clip": ("hf-hub:BGLab/BioTrove-CLIP", "hf-hub:BGLab/BioTrove-CLIP", None, "hf-hub"),
        "siglip": ("hf-hub:timm/ViT-B-16-SigLIP", "hf-hub:timm/ViT-B-16-SigLIP", None, "hf-hub"),
    }
    for alias, fields in expected.items():
        spec = resolve_model(alias)
        assert (spec.id, spec.open_clip_name, spec.pretrained, spec.source) == fields, alias
        assert spec.revision is None
    assert set(MODELS) == set(expected) | set(PINS) | {"demo"}  # demo: tests/models/test_demo_alias.py


@pytest.mark.parametrize("alias", sorted(set(MODELS) - {"demo"}))  # demo needs a trained demo (its own test)
def test_every_alias_round_trips_through_its_id(alias):
    spec = resolve_model(alias)
    assert resolve_model(spec.id, spec.revision) == spec.replace(alias=None)
    assert isinstance(spec, ModelSpec)
    with pytest.raises(AttributeError):
        spec.id = "x"  # frozen


def test_aliases_are_case_insensitive():
    assert resolve_model("BioCLIP") == resolve_model("bioclip")


def test_string_forms(tmp_path, monkeypatch):
    spec = resolve_model("hf-hub:some-org/some-model")
    assert (spec.source, spec.revision, spec.hub_repo) == ("hf-hub", None, "some-org/some-model")
    assert resolve_model("hf-hub:some-org/some-model@abc123").revision == "abc123"
    assert resolve_model("hf-hub:some-org/some-model", revision="r2").revision == "r2"

    monkeypatch.chdir(tmp_path)
    local = resolve_model("local-dir:./ckpt")
    assert local.source == "local-dir"
    assert local.id == f"local-dir:{(tmp_path / 'ckpt').resolve()}" == local.open_clip_name
    assert local.revision is None

    tag = resolve_model("ViT-B-32/laion2b_s34b_b79k")
    assert (tag.source, tag.open_clip_name, tag.pretrained) == ("open_clip", "ViT-B-32", "laion2b_s34b_b79k")
    absolute = resolve_model("ViT-B-16//data/weights.pt")
    assert absolute.pretrained == "/data/weights.pt" and absolute.id == "ViT-B-16//data/weights.pt"
    relative = resolve_model("ViT-B-16/./weights.safetensors")
    assert relative.pretrained == str(tmp_path.resolve() / "weights.safetensors")
    bare_file = resolve_model("ViT-B-16/weights.bin")
    assert bare_file.pretrained == str(tmp_path.resolve() / "weights.bin")


def test_malformed_names():
    with pytest.raises(ModelLoadError, match="ORG/NAME"):
        resolve_model("hf-hub:no-org")
    with pytest.raises(ModelLoadError, match="revision"):
        resolve_model("hf-hub:a/b@one", revision="two")
    with pytest.raises(ModelLoadError):
        resolve_model("local-dir:")


@pytest.mark.parametrize("name", ["ftp://host/weights.pt", "ViT-B-16/ftp://host/weights.pt", "s3://bucket/w.pt",
                                  "ViT-B-16/https://u:pw@host/weights.pt", "openai-compatible:m@ftp://u:pw@host/v1",
                                  "openai-compatible:m@http://u:pw@host/v1"])
def test_urls_and_endpoints_are_usage_errors_not_missing_weights_files(name):
    # Where an image-text encoder is needed (embed, a stored column's model, load_encoder), an endpoint is refused too.
    with pytest.raises(UsageError) as info:
        resolve_encoder(name)
    message = str(info.value)
    assert "does not exist" not in message and "pw" not in message and info.value.exit_code == 2
    scheme = name.split("://")[0].rsplit("@", 1)[-1].rsplit("/", 1)[-1]
    if name.startswith("openai-compatible:") and scheme == "http":
        assert "VLM behind an endpoint" in message
    elif scheme in ("http", "https"):
        assert "a URL is not a model name" in message
    else:
        assert f"the scheme {scheme}:// is not supported" in message


def test_cli_says_an_unsupported_scheme_is_not_supported(tmp_path, capsys):
    from cladebench import store
    from cladebench.cli import main
    from cladebench.synthetic import WorldConfig, make_world

    path = tmp_path / "d.lance"
    store.write_dataset(make_world(WorldConfig(seed=1)).to_table(8, seed=1), path)
    for args in (["embed", str(path), "--model", "ftp://host/w.pt"],
                 ["eval", "rerank", str(path), "--model", "openai-compatible:m@ftp://host/v1",
                  "--out", str(tmp_path / "out")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "the scheme ftp:// is not supported" in err and "does not exist" not in err
    assert not (tmp_path / "out").exists()


def test_unknown_name_lists_aliases_closest_and_forms():
    with pytest.raises(UnknownNameError) as info:
        resolve_model("bioclp")
    message = str(info.value)
    assert "unknown model 'bioclp'" in message
    assert all(alias in message for alias in MODELS)
    assert "Did you mean 'bioclip'?" in message
    assert "hf-hub:ORG/NAME" in message and "local-dir:PATH" in message
    assert isinstance(info.value, CladebenchError)


def test_register_model_rejects_a_second_registration():
    with pytest.raises(ValueError, match="twice"):
        register_model("bioclip")(lambda revision: resolve_model("bioclip"))


def test_core_imports_without_torch():
    code = ("import sys; import cladebench.models, cladebench.models.tiny, cladebench.templates; "
            "from cladebench.models import resolve_model; resolve_model('bioclip'); "
            "bad = [m for m in ('torch', 'open_clip', 'torchvision') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- offline Hub behaviour -----------------------------------------------------------------------


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 and an empty Hugging Face cache, set after huggingface_hub was imported."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return tmp_path / "hf-home" / "hub"


@pytest.mark.parametrize("alias", ["bioclip", "bioclip-2.5", "siglip"])
def test_offline_hub_model_fails_fast_and_clearly(empty_hub, alias):
    pytest.importorskip("huggingface_hub")
    from cladebench.models import load_encoder

    spec = resolve_model(alias)
    started = time.perf_counter()
    with pytest.raises(ModelUnavailableError) as info:
        load_encoder(alias, device="cpu")
    elapsed = time.perf_counter() - started
    message = str(info.value)
    assert spec.hub_repo in message
    assert (spec.revision or "main") in message
    assert "HF_HUB_OFFLINE" in message and str(empty_hub) in message
    assert elapsed < 5, f"offline failure took {elapsed:.1f}s"
    assert info.value.exit_code == 5  # a RemoteUnavailableError to the CLI


def test_online_fetch_takes_config_one_weights_file_and_tokenizer_only(tmp_path, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    hub_constants = pytest.importorskip("huggingface_hub.constants")
    from huggingface_hub.errors import LocalEntryNotFoundError

    from cladebench.models import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)  # was read at import
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    repo_files = {
        "BGLab/BioTrove-CLIP": ["README.md", "open_clip_config.json", "open_clip_pytorch_model.bin",
                                "biotroveclip-vit-b-16-from-openai-epoch-40.pt", "big/embeddings.json"],
        "org/both": ["open_clip_config.json", "open_clip_model.safetensors", "open_clip_pytorch_model.bin",
                     "tokenizer.json"],
        "org/not-open-clip": ["config.json", "model.safetensors"],
    }
    downloads = []

    def fake_snapshot_download(repo, *, revision=None, cache_dir=None, local_files_only=False, allow_patterns=None):
        if local_files_only:
            raise LocalEntryNotFoundError("not cached")
        downloads.append((repo, revision, tuple(allow_patterns)))
        return str(tmp_path / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / ("a" * 40))

    def fake_list_repo_files(self, repo, revision=None):
        if repo not in repo_files:
            raise ConnectionError("network unreachable")
        return repo_files[repo]

    def fake_model_info(self, repo, revision=None, timeout=None):  # the one quick request before a download
        fake_list_repo_files(self, repo, revision)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", fake_list_repo_files)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", fake_model_info)

    folder, commit = hub.fetch_snapshot("BGLab/BioTrove-CLIP", None)
    assert commit == "a" * 40 and folder.name == commit
    patterns = downloads[-1][2]
    assert "open_clip_pytorch_model.bin" in patterns and "open_clip_config.json" in patterns
    assert not any(p.endswith(".pt") or "*" in p for p in patterns)  # no 1 GB side checkpoints

    hub.fetch_snapshot("org/both", "v2")
    assert downloads[-1][1] == "v2"
    assert "open_clip_model.safetensors" in downloads[-1][2] and "open_clip_pytorch_model.bin" not in downloads[-1][2]

    with pytest.raises(ModelLoadError, match="not an open_clip checkpoint"):
        hub.fetch_snapshot("org/not-open-clip", None)
    with pytest.raises(ModelUnavailableError, match="could not be reached"):
        hub.fetch_snapshot("org/unreachable", None)


def test_offline_open_clip_tag_fails_clearly(empty_hub):
    pytest.importorskip("open_clip")
    from cladebench.models import load_encoder

    with pytest.raises(ModelUnavailableError, match=r"ViT-B-16/openai.*timm/vit_base_patch16_clip_224\.openai"):
        load_encoder("clip-vit-b-16", device="cpu")


def test_openai_tags_get_quickgelu_and_tag_preprocessing(monkeypatch):
    pytest.importorskip("open_clip")
    from cladebench.models import hub, openclip

    fetched = {}

    def fake_fetch(repo, filenames, revision):
        fetched.update(repo=repo, filenames=filenames, revision=revision)
        return Path("/cache/snapshots/0123abc/open_clip_pytorch_model.bin"), "0123abc"

    monkeypatch.setattr(hub, "fetch_file", fake_fetch)
    load = openclip.FETCHERS["open_clip"](resolve_model("clip-vit-b-16"))
    assert fetched["repo"] == "timm/vit_base_patch16_clip_224.openai"
    assert load.options["force_quick_gelu"] is True  # OpenAI weights were trained with QuickGELU
    assert load.options["force_preprocess_cfg"]["resize_mode"] == "shortest"
    assert (load.model_name, load.revision) == ("ViT-B-16", "0123abc")
    assert load.pretrained.endswith("open_clip_pytorch_model.bin")
    laion = openclip.FETCHERS["open_clip"](resolve_model("ViT-B-16/laion2b_s34b_b88k"))
    assert laion.options["force_quick_gelu"] is False


def test_unknown_pretrained_tag(monkeypatch):
    pytest.importorskip("open_clip")
    from cladebench.models import openclip

    with pytest.raises(UnknownNameError, match="Did you mean 'openai'"):
        openclip.FETCHERS["open_clip"](resolve_model("ViT-B-16/opnai"))
    with pytest.raises(UnknownNameError, match="open_clip architecture"):
        openclip.FETCHERS["open_clip"](resolve_model("ViT-B-99/openai"))


# --- the tiny checkpoint -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    pytest.importorskip("open_clip")
    from cladebench.models.tiny import tiny_model_id

    return Path(tiny_model_id(tmp_path_factory.mktemp("models")).removeprefix("local-dir:"))


@pytest.fixture(scope="session")
def encoder(tiny_dir):
    from cladebench.models import load_encoder

    return load_encoder(f"local-dir:{tiny_dir}", device="cpu")


@pytest.fixture(scope="session")
def pixels():
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(0)
    return torch.randn(5, 3, 64, 64, generator=generator)


def test_tiny_checkpoint_layout(tiny_dir):
    config = json.loads((tiny_dir / "open_clip_config.json").read_text())
    assert set(config) >= {"model_cfg", "preprocess_cfg"}
    assert config["model_cfg"]["vision_cfg"]["image_size"] == 64
    assert (tiny_dir / "open_clip_model.safetensors").stat().st_size > 1_000_000
    assert len(list(tiny_dir.glob("cladebench-tiny-*.json"))) == 1


def test_tiny_model_id_writes_once(tiny_dir):
    from cladebench.models.tiny import tiny_model_id

    weights = tiny_dir / "open_clip_model.safetensors"
    before = weights.stat().st_mtime_ns
    assert tiny_model_id(tiny_dir.parent) == f"local-dir:{tiny_dir}"
    assert weights.stat().st_mtime_ns == before
    assert not list(tiny_dir.parent.glob(".tiny-*"))  # no staging folder left behind


def test_tiny_weights_are_deterministic_per_seed(tmp_path, tiny_dir):
    from cladebench.models.openclip import files_digest
    from cladebench.models.tiny import write_tiny_model

    same = write_tiny_model(tmp_path / "same", seed=0)
    other = write_tiny_model(tmp_path / "other", seed=1)
    name = "open_clip_model.safetensors"
    assert (same / name).read_bytes() == (tiny_dir / name).read_bytes()
    assert (other / name).read_bytes() != (tiny_dir / name).read_bytes()
    assert files_digest([same / name]) == files_digest([tiny_dir / name]) != files_digest([other / name])


def test_encoder_attributes(encoder, tiny_dir):
    assert encoder.model_id == f"local-dir:{tiny_dir}"
    assert encoder.revision.startswith("sha256:") and len(encoder.revision) == len("sha256:") + 64
    assert encoder.dim == 32
    assert (encoder.device, encoder.precision) == ("cpu", "fp32")
    assert encoder.logit_scale == pytest.approx(1 / 0.07, rel=1e-5)  # open_clip's initial scale, exp'd
    assert encoder.logit_bias is None
    assert encoder.preprocessing.mode == "openclip" and encoder.preprocessing.size == (64, 64)
    described = encoder.describe()
    json.dumps(described)  # JSON-ready
    assert described["model_id"] == encoder.model_id and described["revision"] == encoder.revision
    assert described["preprocessing"] == encoder.preprocessing.to_dict()
    assert set(described["software"]) >= {"torch", "open_clip_torch", "cladebench"}
    assert described["logit_scale"] == encoder.logit_scale and described["dim"] == 32


def test_encode_images_raw_float32_deterministic(encoder, pixels):
    first = encoder.encode_images(pixels)
    assert first.shape == (5, 32) and first.dtype == np.float32
    norms = np.linalg.norm(first, axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3), "embeddings must be raw, not normalised"
    np.testing.assert_array_equal(first, encoder.encode_images(pixels))
    np.testing.assert_allclose(encoder.encode_images(pixels[:2]), first[:2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="batch"):
        encoder.encode_images(pixels[0])


def test_encode_texts_raw_float32_batched(encoder):
    texts = ["Felis catus", "Panthera leo", "an image of a cat.", "", "x" * 500]  # long text gets truncated
    full = encoder.encode_texts(texts)
    assert full.shape == (5, 32) and full.dtype == np.float32
    assert not np.allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(encoder.encode_texts(texts, batch_size=2), full, rtol=1e-5, atol=1e-5)
    assert not np.allclose(full[0], full[1])
    assert encoder.encode_texts([]).shape == (0, 32)
    with pytest.raises(TypeError):
        encoder.encode_texts("one string")


def test_name_pretrained_form_loads_the_same_weights(encoder, tiny_dir, pixels):
    from cladebench.models import load_encoder
    from cladebench.models.tiny import tiny_pretrained_id

    name = tiny_pretrained_id(tiny_dir)
    assert name.endswith("/open_clip_model.safetensors") and name.startswith("cladebench-tiny-")
    other = load_encoder(name, device="cpu")
    assert other.spec.source == "open_clip" and other.model_id == name
    np.testing.assert_array_equal(other.encode_images(pixels), encoder.encode_images(pixels))
    np.testing.assert_array_equal(other.encode_texts(["a b"]), encoder.encode_texts(["a b"]))


def test_different_seed_gives_different_embeddings(tmp_path, encoder, pixels):
    from cladebench.models import load_encoder
    from cladebench.models.tiny import write_tiny_model

    other = load_encoder(f"local-dir:{write_tiny_model(tmp_path / 's1', seed=1)}", device="cpu")
    assert other.revision != encoder.revision
    assert not np.allclose(other.encode_images(pixels), encoder.encode_images(pixels))


def test_bf16_autocast_returns_float32(tiny_dir, encoder, pixels):
    from cladebench.models import load_encoder

    low = load_encoder(f"local-dir:{tiny_dir}", device="cpu", precision="bf16")
    out = low.encode_images(pixels)
    assert out.dtype == np.float32 and low.precision == "bf16"
    reference = encoder.encode_images(pixels)
    assert not np.array_equal(out, reference)  # autocast really ran in bfloat16
    cosine = np.sum(out * reference, 1) / np.linalg.norm(out, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() > 0.98


def test_precision_and_device_errors(tiny_dir):
    from cladebench.models import load_encoder
    from cladebench.models.openclip import check_precision, resolve_device

    with pytest.raises(CladebenchError, match="fp16 needs a GPU"):
        load_encoder(f"local-dir:{tiny_dir}", device="cpu", precision="fp16")
    with pytest.raises(UnknownNameError, match="fp32"):
        load_encoder(f"local-dir:{tiny_dir}", device="cpu", precision="fp8")
    with pytest.raises(UnknownNameError):
        resolve_device("tpu")
    check_precision("bf16", "cpu")
    assert resolve_device("auto") in ("cuda", "mps", "cpu")
    assert resolve_device("cpu") == "cpu"


def test_missing_local_checkpoint(tmp_path):
    from cladebench.models import load_encoder

    with pytest.raises(SchemaError, match=r"open_clip_config\.json") as info:  # a folder of no layout: exit 4
        load_encoder(f"local-dir:{tmp_path}", device="cpu")
    assert str(tmp_path) in str(info.value) and "save_for_hf" in str(info.value) and info.value.exit_code == 4
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_encoder(f"ViT-B-16/{tmp_path / 'nothing.pt'}", device="cpu")


def _fake_hub_cache(hub_dir: Path, repo: str, commit: str, tiny_dir: Path, ref: str | None = None) -> None:
    """Lay the tiny checkpoint out as the Hugging Face cache holds a downloaded snapshot."""
    storage = hub_dir / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("open_clip_config.json", "open_clip_model.safetensors"):
        shutil.copyfile(tiny_dir / name, snapshot / name)
    if ref:
        (storage / "refs").mkdir()
        (storage / "refs" / ref).write_text(commit)


def test_pinned_revision_is_loaded_from_the_cache_offline(empty_hub, tiny_dir, encoder, pixels):
    from cladebench.models import load_encoder

    pinned = PINS["bioclip"][1]
    _fake_hub_cache(empty_hub, "imageomics/bioclip", pinned, tiny_dir)
    loaded = load_encoder("bioclip", device="cpu")
    assert (loaded.model_id, loaded.revision, loaded.spec.alias) == ("hf-hub:imageomics/bioclip", pinned, "bioclip")
    np.testing.assert_array_equal(loaded.encode_images(pixels), encoder.encode_images(pixels))
    # Another revision of the same repo is not what the cache holds: no silent substitution.
    with pytest.raises(ModelUnavailableError, match="0" * 40):
        load_encoder("bioclip", revision="0" * 40, device="cpu")


def test_unpinned_hub_model_records_the_commit_of_main(empty_hub, tiny_dir):
    from cladebench.models import load_encoder

    commit = "c" * 40
    _fake_hub_cache(empty_hub, "someone/tiny-clip", commit, tiny_dir, ref="main")
    loaded = load_encoder("hf-hub:someone/tiny-clip", device="cpu")
    assert loaded.spec.revision is None and loaded.revision == commit


# --- preprocessing -------------------------------------------------------------------------------


def _striped_image() -> Image.Image:
    """128 x 64 (wide): the left 16 columns pure red, the rest mid grey."""
    image = np.full((64, 128, 3), 128, dtype=np.uint8)
    image[:, :16] = (255, 0, 0)
    return Image.fromarray(image)


def _normalised_red(p: Preprocessing) -> np.ndarray:
    return (np.array([1.0, 0.0, 0.0]) - np.array(p.mean)) / np.array(p.std)


def test_tol_keeps_the_border_openclip_crops_it(encoder):
    pytest.importorskip("torchvision")
    openclip_p = encoder.preprocessing
    tol_p = Preprocessing.from_model_config({"size": 64, "mean": openclip_p.mean, "std": openclip_p.std}, "tol")
    assert (tol_p.mode, tol_p.resize_mode, tol_p.interpolation) == ("tol", "squash", "bilinear")
    image = _striped_image()
    cropped = openclip_p.build()(image).numpy()
    squashed = tol_p.build()(image).numpy()
    assert cropped.shape == squashed.shape == (3, 64, 64)
    assert cropped.dtype == squashed.dtype == np.float32
    red = _normalised_red(tol_p)
    # tol: the 128 px width is squashed to 64, so the red band is columns 0..7; it survives.
    np.testing.assert_allclose(squashed[:, 32, 2], red, atol=0.05)
    # openclip: shortest side is already 64, the centre crop keeps columns 32..95: the band is gone.
    assert np.abs(cropped[:, 32, 2] - red).max() > 1.0
    assert not np.allclose(cropped, squashed)


def test_openclip_mode_matches_open_clip_transform(encoder):
    open_clip = pytest.importorskip("open_clip")
    _, _, reference = open_clip.create_model_and_transforms(encoder.model_id)
    image = _striped_image()
    np.testing.assert_allclose(encoder.preprocessing.build()(image).numpy(), reference(image).numpy(), atol=1e-6)


def test_grayscale_input_becomes_three_channels(encoder):
    gray = Image.fromarray(np.full((40, 90), 200, dtype=np.uint8), mode="L")
    assert tuple(encoder.preprocessing.build()(gray).shape) == (3, 64, 64)
    assert encoder.encode_pil([gray, gray.convert("RGB")]).shape == (2, 32)


def test_preprocessing_round_trips_and_rejects_unknown_modes(encoder):
    p = encoder.preprocessing
    assert Preprocessing.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert pickle.loads(pickle.dumps(p)) == p
    with pytest.raises(UnknownNameError, match="Did you mean 'tol'"):
        Preprocessing(mode="tl", size=(64, 64), mean=(0, 0, 0), std=(1, 1, 1))
    with pytest.raises(ValueError):
        Preprocessing(mode="tol", size=(0, 64), mean=(0, 0, 0), std=(1, 1, 1))


_WORKER = """
import io, pickle, sys
from PIL import Image
preprocessings, png = pickle.load(sys.stdin.buffer)
assert "torch" not in sys.modules  # unpickling needs no torch: the dataclass holds plain values
image = Image.open(io.BytesIO(png))
sys.stdout.buffer.write(pickle.dumps([p.build()(image).numpy() for p in preprocessings]))
"""


def test_preprocessing_builds_in_a_fresh_process(encoder):
    """What a DataLoader worker does: receive the pickled dataclass, build the transform, apply it."""
    import io

    modes = [encoder.preprocessing, Preprocessing.from_model_config(
        {"size": 64, "mean": encoder.preprocessing.mean, "std": encoder.preprocessing.std}, "tol")]
    buffer = io.BytesIO()
    _striped_image().save(buffer, format="PNG")
    result = subprocess.run([sys.executable, "-c", _WORKER], input=pickle.dumps((modes, buffer.getvalue())),
                            capture_output=True, check=True)
    in_worker = pickle.loads(result.stdout)
    assert len(in_worker) == 2 and not np.allclose(in_worker[0], in_worker[1])
    for p, array in zip(modes, in_worker, strict=True):
        np.testing.assert_array_equal(array, p.build()(_striped_image()).numpy())


# --- text embeddings and their cache -------------------------------------------------------------


class CountingEncoder:
    """Forwards to an encoder and counts the texts it was asked to encode."""

    def __init__(self, inner, revision=None):
        self.inner = inner
        self.model_id = inner.model_id
        self.revision = revision if revision is not None else inner.revision
        self.precision = getattr(inner, "precision", "fp32")
        self.dim = inner.dim
        self.calls = 0
        self.texts = 0

    def encode_texts(self, texts, batch_size=256):
        self.calls += 1
        self.texts += len(texts)
        return self.inner.encode_texts(texts, batch_size=batch_size)


class HashEncoder:
    """A torch-free encoder: each text's vector is seeded by its bytes, so tests know what it returns."""

    model_id = "hash-encoder"
    revision = "r1"
    precision = "fp32"
    dim = 8

    def encode_texts(self, texts, batch_size=256):
        rows = [np.random.default_rng(list(t.encode()) or [0]).normal(size=self.dim) * 3 for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)


def test_class_embeddings_follow_clip_construction(tmp_path):
    encoder = HashEncoder()
    labels = ["Felis catus", "Panthera leo", "Canis lupus"]
    templates = ["a photo of {c}.", "an image of {}."]
    got = class_text_embeddings(encoder, labels, templates, cache_dir=tmp_path)
    expected = []
    for label in labels:
        raw = encoder.encode_texts([t.replace("{}", "{c}").replace("{c}", label) for t in templates])
        unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        mean = unit.mean(axis=0)
        expected.append(mean / np.linalg.norm(mean))
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-5, atol=1e-6)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    # Chunking over labels gives the same rows as one pass.
    chunked = _encode_classes(lambda texts: encoder.encode_texts(texts), labels, ["a {c}"] * 5000)
    whole = _unit_rows_reference(encoder, labels, "a {c}")
    np.testing.assert_allclose(chunked, whole, atol=1e-4)  # float32 sums over 5000 rows


def _unit_rows_reference(encoder, labels, template):
    raw = encoder.encode_texts([template.replace("{c}", label) for label in labels])
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def test_second_call_reads_the_cache_not_the_model(tmp_path, encoder):
    counting = CountingEncoder(encoder)
    labels = ["Felis catus", "Panthera leo", "Canis lupus familiaris"]
    first = class_text_embeddings(counting, labels, "openai-imagenet", cache_dir=tmp_path)
    assert first.shape == (3, 32) and counting.texts == 3 * 80
    calls = counting.calls
    second = class_text_embeddings(counting, labels, "openai-imagenet", cache_dir=tmp_path)
    assert counting.calls == calls, "a cached label set must not reach the model"
    np.testing.assert_array_equal(first, second)
    entries = list(tmp_path.rglob("*.npy"))
    assert len(entries) == 1 and not list(tmp_path.rglob("*.tmp"))
    info = json.loads(entries[0].with_suffix(".json").read_text())
    assert info["model_id"] == encoder.model_id and info["revision"] == encoder.revision
    assert info["n_labels"] == 3 and len(info["templates"]) == 80 and info["key"] == entries[0].stem


def test_cache_key_changes_with_what_the_embeddings_depend_on(tmp_path):
    base = dict(model_id="m", revision="r", templates=["a {c}"], labels=["x", "y"], precision="fp32")
    key = text_cache_key(**base)
    changes = [
        {"templates": ["an {c}"]}, {"templates": ["a {c}", "b {c}"]}, {"labels": ["x", "z"]},
        {"labels": ["y", "x"]}, {"revision": "r2"}, {"revision": None}, {"model_id": "m2"},
        {"precision": "fp16"},
    ]
    keys = {text_cache_key(**{**base, **change}) for change in changes}
    assert key not in keys and len(keys) == len(changes)
    assert text_cache_key(**base) == key  # stable

    counting = CountingEncoder(HashEncoder())
    class_text_embeddings(counting, ["x", "y"], "a photo of {c}.", cache_dir=tmp_path)
    class_text_embeddings(counting, ["x", "y"], "a photo of {}.", cache_dir=tmp_path)  # same template
    assert counting.calls == 1
    class_text_embeddings(counting, ["x", "y", "z"], "a photo of {c}.", cache_dir=tmp_path)
    class_text_embeddings(counting, ["x", "y"], "photo", cache_dir=tmp_path)  # the set: "a photo of {c}."
    assert counting.calls == 2
    class_text_embeddings(CountingEncoder(HashEncoder(), revision="r2"), ["x", "y"], "photo", cache_dir=tmp_path)
    assert len(list(tmp_path.rglob("*.npy"))) == 3


def test_corrupt_cache_entry_is_recomputed(tmp_path):
    counting = CountingEncoder(HashEncoder())
    first = class_text_embeddings(counting, ["x"], "photo", cache_dir=tmp_path)
    entry = next(tmp_path.rglob("*.npy"))
    entry.write_bytes(b"not an array")
    again = class_text_embeddings(counting, ["x"], "photo", cache_dir=tmp_path)
    assert counting.calls == 2
    np.testing.assert_array_equal(first, again)


def test_text_cache_defaults_to_cladebench_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path))
    class_text_embeddings(HashEncoder(), ["x"], "photo")
    assert list((tmp_path / "text_embeddings").rglob("*.npy"))
