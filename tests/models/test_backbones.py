"""Image-only backbones (timm, transformers) from the folders their libraries write and from the Hub cache: the
vectors `cladebench embed` stores are the libraries' own, the kind says what the model can do before anything
loads, and bad folders and names end in one line with exit 2 or 4 (5 offline with nothing cached)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lance
import numpy as np
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.models import resolve_model
from helpers.backbones import cosines, dinov2_vectors, timm_vectors
from helpers.images import picture, write_images
from helpers.toy_dataset import write_toy_dataset

IMAGES = {f"img-{i:02d}": picture(i, size=(80 + 7 * i, 60 + 5 * i), fmt="WEBP" if i % 3 else "JPEG")
          for i in range(10)}
"""Pictures of varied sizes and formats: every resize and crop of the preprocessing is exercised."""


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """The command in a fresh process, reporting whether torch was imported."""
    code = ("import sys\nfrom cladebench.cli import main\ncode = main(sys.argv[1:])\n"
            "print('LOADED', sorted(m for m in ('torch', 'timm', 'transformers') if m in sys.modules), "
            "file=sys.stderr)\nsys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **env})


def test_backbone_names_resolve_to_image_only_kinds_without_torch(tiny_timm: Path, tiny_dinov2: Path) -> None:
    names = [f"local-dir:{tiny_timm}", f"local-dir:{tiny_dinov2}", "timm:vit_small_patch14_dinov2.lvd142m@abc"]
    code = ("import json, sys\nfrom cladebench.models import resolve_model\n"
            f"specs = [resolve_model(n) for n in {json.dumps(names)}]\n"
            "print(json.dumps([[s.kind, s.source, s.id, s.revision, s.column, sorted(s.capabilities), s.needs_torch]"
            " for s in specs] + [sorted(m for m in ('torch', 'timm', 'transformers') if m in sys.modules)]))\n")
    *specs, loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                               text=True).stdout)
    assert loaded == []
    assert specs == [
        ["timm", "local-dir", f"local-dir:{tiny_timm}", None, "emb_tinytimm", ["embeds images"], True],
        ["hf-vision", "local-dir", f"local-dir:{tiny_dinov2}", None, "emb_tinydinov2", ["embeds images"], True],
        ["timm", "timm", "timm:vit_small_patch14_dinov2.lvd142m", "abc", "emb_vit_small_patch14_dinov2plvd142m_abc",
         ["embeds images"], True],
    ]


@pytest.mark.parametrize(("which", "reference", "mode", "embedding"), [
    ("timm", timm_vectors, "timm", "pre-logits"),
    ("dinov2", dinov2_vectors, "transformers", "dinov2: CLS token of last_hidden_state"),
])
def test_embed_stores_the_librarys_own_vectors(tmp_path: Path, tiny_timm: Path, tiny_dinov2: Path, which: str,
                                               reference, mode: str, embedding: str) -> None:
    folder = tiny_timm if which == "timm" else tiny_dinov2
    path = tmp_path / "pictures.lance"
    write_images(path, IMAGES)
    # Two decoding workers: the preprocessing travels to them as plain values and is rebuilt there.
    assert main(["embed", str(path), "--model", f"local-dir:{folder}", "--device", "cpu", "--workers", "2",
                 "--batch-size", "4", "--no-progress"]) == 0
    column = f"emb_{folder.name.replace('-', '')}"
    table = lance.dataset(str(path)).to_table(columns=["uuid", column])
    stored = {u: np.asarray(v, np.float32) for u, v in zip(table["uuid"].to_pylist(), table[column].to_pylist(),
                                                            strict=True)}
    assert min(cosines(stored, reference(folder, IMAGES))) >= 0.9999
    metadata = store.embedding_metadata(lance.dataset(str(path)).schema.field(column))
    assert metadata["model"] == f"local-dir:{folder}" and metadata["revision"].startswith("sha256:")
    assert metadata["preprocessing"]["mode"] == mode and metadata["preprocessing"]["config"]
    assert embedding in metadata["embedding"]


@pytest.mark.parametrize(("which", "kind", "reference"), [("dinov2", "hf-vision", dinov2_vectors),
                                                        ("timm", "timm", timm_vectors)])
def test_a_hub_repo_in_the_cache_is_read_by_its_own_library(tmp_path: Path, tiny_dinov2: Path, tiny_timm: Path,
                                                             monkeypatch, which: str, kind: str, reference) -> None:
    # The cache as huggingface_hub lays out a downloaded snapshot: the repo's config.json says whose it is.
    folder = tiny_dinov2 if which == "dinov2" else tiny_timm
    commit = "c" * 40
    storage = tmp_path / "hf" / "hub" / f"models--test-org--tiny-{which}"
    shutil.copytree(folder, storage / "snapshots" / commit)
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    spec = resolve_model(f"hf-hub:test-org/tiny-{which}")
    assert (spec.kind, spec.source, spec.column) == (kind, "hf-hub", f"emb_tiny{which}")
    from PIL import Image

    from cladebench.models import load_encoder

    encoder = load_encoder(f"hf-hub:test-org/tiny-{which}", device="cpu")
    assert encoder.describe()["revision"] == commit and encoder.dim == 48
    pil = [Image.open(io.BytesIO(data)) for data in IMAGES.values()]
    vectors = dict(zip(IMAGES, encoder.encode_pil(pil), strict=True))
    assert min(cosines(vectors, reference(folder, IMAGES))) >= 0.9999


def test_a_text_task_on_an_image_only_model_is_refused_before_anything_loads(tmp_path: Path,
                                                                               tiny_dinov2: Path) -> None:
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    out = tmp_path / "run"
    result = _cli(["eval", "zeroshot", str(dataset), "--model", f"local-dir:{tiny_dinov2}", "--out", str(out)])
    assert result.returncode == 2, result.stderr
    error = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(error) == 1
    assert "zeroshot task needs a text tower" in error[0] and f"local-dir:{tiny_dinov2}" in error[0]
    assert "image-only transformers vision model" in error[0] and "tasks that run on it: fewshot, retrieval" in error[0]
    assert "LOADED []" in result.stderr and not out.exists()
    # Text search needs a text tower too: refused before the weights load, not as a missing method.
    result = _cli(["search", str(dataset), "a bird", "--model", f"local-dir:{tiny_dinov2}"])
    assert result.returncode == 2, result.stderr
    assert "text search needs a text tower" in result.stderr and "LOADED []" in result.stderr


def _folder_with(tmp_path: Path, name: str, files: dict[str, str | bytes]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file, content in files.items():
        (folder / file).write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def test_bad_folders_and_names_end_in_one_line_naming_what_was_expected(tmp_path: Path, tiny_timm: Path,
                                                                        capsys) -> None:
    pytest.importorskip("timm")
    dataset = tmp_path / "pictures.lance"
    write_images(dataset, dict(list(IMAGES.items())[:2]))
    timm_config = (tiny_timm / "config.json").read_text()
    unknown_arch = json.loads(timm_config) | {"architecture": "vit_made_up_patch99"}
    cases = [
        (_folder_with(tmp_path, "neither", {"weights.npy": b"\0"}), 4, ["is no model folder", "save_for_hf",
                                                                        "open_clip_config.json"]),
        (_folder_with(tmp_path, "no-weights", {"config.json": timm_config}), 4, ["names a timm model", "no weights"]),
        (_folder_with(tmp_path, "no-processor", {"config.json": '{"model_type": "dinov2"}', "model.safetensors": b""}),
         4, ["no preprocessor_config.json"]),
        (_folder_with(tmp_path, "unknown-arch", {"config.json": json.dumps(unknown_arch),
                                                 "model.safetensors": (tiny_timm / "model.safetensors").read_bytes()}),
         2, ["unknown timm architecture 'vit_made_up_patch99'"]),
    ]
    for folder, code, needles in cases:
        assert main(["embed", str(dataset), "--model", f"local-dir:{folder}", "--device", "cpu", "--no-progress"]
                    ) == code, folder.name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(folder) in err and all(n in err for n in needles), err
    for name, needle in (("timm:vit_tiny_patch16_2244", "unknown timm architecture 'vit_tiny_patch16_2244'"),
                         ("timm:vit_tiny_patch16_224.no_such_tag", "unknown pretrained tag of vit_tiny_patch16_224"),
                         ("timm:", "expected timm:ARCH or timm:ARCH.TAG")):
        assert main(["embed", str(dataset), "--model", name, "--device", "cpu", "--no-progress"]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
    assert "emb_" not in " ".join(lance.dataset(str(dataset)).schema.names)


def test_offline_with_nothing_cached_names_the_model_and_revision(tmp_path: Path) -> None:
    pytest.importorskip("timm")
    dataset = tmp_path / "pictures.lance"
    write_images(dataset, dict(list(IMAGES.items())[:2]))
    empty = {"HF_HOME": str(tmp_path / "empty-hf"), "HF_HUB_CACHE": str(tmp_path / "empty-hf" / "hub")}
    for name, needle in (("timm:vit_small_patch14_dinov2.lvd142m", "hf-hub:timm/vit_small_patch14_dinov2.lvd142m at "
                                                                   "revision main"),
                         ("timm:vit_small_patch14_dinov2.lvd142m@v2", "at revision v2"),
                         ("hf-hub:facebook/dinov2-small", "hf-hub:facebook/dinov2-small at revision main")):
        result = _cli(["embed", str(dataset), "--model", name, "--device", "cpu", "--no-progress"], **empty)
        lines = [line for line in result.stderr.splitlines() if not line.startswith("LOADED")]
        assert result.returncode == 5 and len(lines) == 1, result.stderr
        assert needle in lines[0] and "HF_HUB_OFFLINE" in lines[0], lines[0]


def test_each_task_asks_what_the_model_can_do(tiny_dinov2: Path) -> None:
    from cladebench.evaluate.checks import model_refusal, tasks_for
    from cladebench.models.spec import ANSWERS, EMBEDS_IMAGES, EMBEDS_TEXTS, missing_for
    from cladebench.tasks import get_task

    image_only = resolve_model(f"local-dir:{tiny_dinov2}")
    endpoint = resolve_model("openai-compatible:m@http://127.0.0.1:9/v1")
    both = frozenset({EMBEDS_IMAGES, EMBEDS_TEXTS})
    assert missing_for((both, frozenset({ANSWERS})), frozenset({EMBEDS_IMAGES})) == {EMBEDS_TEXTS}
    assert missing_for((both, frozenset({ANSWERS})), frozenset({ANSWERS})) is None
    assert {name: model_refusal(get_task(name), image_only) for name in ("zeroshot", "geo", "rerank", "lineage",
                                                                          "fewshot", "retrieval")} == {
        "zeroshot": "needs a text tower", "geo": "needs a text tower", "rerank": "needs a text tower",
        "lineage": "needs a text tower", "fewshot": None, "retrieval": None}
    assert model_refusal(get_task("fewshot"), endpoint) == "needs an image tower"
    assert set(tasks_for(image_only)) == {"fewshot", "retrieval"} and set(tasks_for(endpoint)) == {"rerank", "lineage"}
