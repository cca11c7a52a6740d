"""``--not-seen-by NAME`` takes only a name some row's ``seen_in_training`` holds: a typo (``bioclip2`` for
``bioclip-2``) would keep every row, so it is refused in one line (exit 2) naming the closest known names, before
any model loads; a dataset without the column keeps its own error."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.evaluate import run as run_module
from cladebench.synthetic import make_world
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_finegrained_mirror
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mirror") / "fine-grained-challenges"
    write_finegrained_mirror(folder, make_world(MIRROR_WORLD), rows=54)
    return folder


@pytest.fixture()
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the name was checked")

    monkeypatch.setattr(run_module, "load_model", refuse)


def _eval(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["eval", *args])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_misspelt_name_is_refused_naming_the_closest_before_a_model_loads(mirror, tmp_path, monkeypatch, capsys,
                                                                             no_model):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    code, err = _eval(capsys, "zeroshot", "fine-grained-challenges", "--data", str(mirror), "--model", "bioclip-2",
                      "--device", "cpu", "--not-seen-by", "bioclip2", "--out", str(out))
    assert code == 2 and len(err) == 1
    assert "--not-seen-by 'bioclip2'" in err[0] and "did you mean 'bioclip-2'" in err[0]
    assert "known: bioclip, bioclip-2, bioclip-2.5" in err[0]
    assert not out.exists()


def test_a_name_close_to_none_lists_the_known_ones(mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code, err = _eval(capsys, "fewshot", "fine-grained-challenges", "--data", str(mirror), "--shots", "1",
                      "--not-seen-by", "dinov2", "--out", str(tmp_path / "run"))
    assert code == 2 and len(err) == 1
    assert "did you mean" not in err[0] and "known: bioclip, bioclip-2, bioclip-2.5" in err[0]


def test_a_known_name_still_filters(mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code, _ = _eval(capsys, "fewshot", "fine-grained-challenges", "--data", str(mirror), "--shots", "1",
                    "--repetitions", "1", "--methods", "simpleshot", "--not-seen-by", "bioclip",
                    "--out", str(tmp_path / "run"))
    assert code == 0


def test_a_dataset_whose_lists_name_no_model_refuses_any_name(tmp_path, capsys):
    path = write_toy_dataset(tmp_path / "toy.lance")
    table = store.read(store.open_dataset(path))
    table = table.set_column(table.column_names.index("seen_in_training"), "seen_in_training",
                             pa.array([[]] * table.num_rows, pa.list_(pa.string())))
    store.write_dataset(table, tmp_path / "empty.lance")
    code, err = _eval(capsys, "fewshot", str(tmp_path / "empty.lance"), "--column", "emb_toy", "--shots", "1",
                      "--not-seen-by", "bioclip-2", "--out", str(tmp_path / "run"))
    assert code == 2 and len(err) == 1 and "names any model" in err[0]


def test_a_dataset_without_the_column_keeps_its_error(tmp_path, capsys):
    table = store.read(store.open_dataset(write_toy_dataset(tmp_path / "toy.lance")))
    path = tmp_path / "no-column.lance"
    lance.write_dataset(table.drop_columns(["seen_in_training"]), path)  # not through the canonical writer
    code, err = _eval(capsys, "fewshot", str(path), "--column", "emb_toy", "--shots", "1", "--not-seen-by",
                      "bioclip-2", "--out", str(tmp_path / "run"))
    assert code == 1 and len(err) == 1 and "need a seen_in_training column" in err[0]
