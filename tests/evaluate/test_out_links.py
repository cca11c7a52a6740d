"""An --out behind a symbolic link that leads nowhere (a missing path, a loop), itself or a folder above it, is
refused in one line before the evaluation runs, never after it or as an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main
from helpers.toy_dataset import write_toy_dataset


@pytest.mark.parametrize("out", ["dangling/run", "loop", "loop/run"])
def test_eval_refuses_an_out_through_a_link_to_nothing(tmp_path: Path, out: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    toy = write_toy_dataset(tmp_path / "toy.lance")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    code = main(["eval", "retrieval", str(toy), "--column", "emb_toy", "--group-by", "none",
                 "--out", str(tmp_path / out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"{tmp_path / out.split('/')[0]} is a symbolic link to" in err and "internal error" not in err
    assert not (tmp_path / "gone").exists()
