"""Every named benchmark from a mirror in its published layout (offline), with the tiny model: FGC zero-shot per
group with genus-only rows in the inspection table only, CrypticBio's photos fetched once with results per
taxonomic and cryptic group, INQUIRE-Rerank and Co-Observed built once from their Parquet files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cladebench import store

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.configs import eval_config
from cladebench.evaluate.run import run_eval
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import make_world
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_crypticbio_mirror, write_mirrors
from helpers.http_local import serving
from helpers.photo_host import PhotoHost


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "local-dir:" + str(write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny", seed=2))


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mirrors(tmp_path_factory.mktemp("mirrors")).root


def _eval(name: str, model: str, out: Path, **settings):
    return run_eval(eval_config(dataset=name, model=model, out=out, device="cpu", **settings))[0]


def test_fgc_zero_shot_per_group_with_genus_only_rows_inspected_never_scored(mirrors, model, tmp_path):
    folder = tmp_path / "fgc"
    shutil.copytree(mirrors / "fine-grained-challenges", folder)
    embed_dataset(EmbedConfig(dataset=str(folder / "data/challenges.lance"), model=model, device="cpu"))
    record = _eval("fine-grained-challenges", model, tmp_path / "run", data=folder)
    table = store.read(store.open_dataset(folder / "data/challenges.lance"), columns=["challenge_group", "species"])
    counts: dict[str, list[int]] = {}
    for group, species in zip(table.column("challenge_group").to_pylist(), table.column("species").to_pylist(),
                              strict=True):
        counts.setdefault(group, [0, 0])[species is None] += 1
    assert "top1_species" not in record.metrics  # groups are never pooled
    for group, (named, genus_only) in counts.items():
        assert record.metrics[f"{group}/top1_species"]["n"] == named
        assert record.provenance["label_sets"][group]["size"] == 6
        if genus_only:
            assert record.inspection[group]["genus_only_rows"] == genus_only
        else:
            assert group not in record.inspection
    assert sum(genus_only for _, genus_only in counts.values()) > 0


def test_crypticbio_photos_are_fetched_once_and_results_break_down_by_group(model, tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    with serving(PhotoHost({})) as host:
        host.photos.update(write_crypticbio_mirror(tmp_path / "common", make_world(MIRROR_WORLD),
                                                   "crypticbio-common", photo_base_url=host.url("")))
        first = _eval("crypticbio-common", model, tmp_path / "sci", data=tmp_path / "common")
        common = _eval("crypticbio-common", model, tmp_path / "com", data=tmp_path / "common", name_style="com")
        assert set(host.requests) == set(host.photos) and set(host.requests.values()) == {1}
    assert first.provenance["prompts"]["name_style"] == "sci" and common.provenance["prompts"]["name_style"] == "com"
    assert first.provenance["dataset"]["benchmark_source"]["kind"] == "mirror"
    names = set(first.metrics)
    assert "top1_species" in names
    assert any(n.startswith("taxonomic_group=") for n in names) and any(n.startswith("cryptic_group=") for n in names)
    assert first.provenance["breakdown_rows_without_value"] == {"taxonomic_group": 0, "cryptic_group": 0}


@pytest.mark.parametrize("name", ["inquire-rerank", "inat-coobserved"])
def test_hub_benchmarks_are_built_once_from_a_mirror(name, mirrors, model, tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(mirrors))
    record = _eval(name, model, tmp_path / "first")
    built = Path(record.provenance["dataset"]["uri"])
    assert record.provenance["dataset"]["benchmark"] == name and built.is_relative_to(tmp_path / "cache")
    versions = sorted(p.name for p in (built / "_versions").iterdir())
    again = _eval(name, model, tmp_path / "again")
    assert again.provenance["dataset"]["uri"] == str(built) and again.metrics == record.metrics
    assert record.provenance["dataset"]["benchmark_source"]["folder"] == str((mirrors / name).resolve())
    assert sorted(p.name for p in (built / "_versions").iterdir()) == versions  # nothing built or embedded again
    assert [p.name for p in built.parent.glob("*.lance")] == [built.name]
    if name == "inquire-rerank":
        assert any(n.startswith("supercategory=") for n in record.metrics)
