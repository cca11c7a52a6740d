"""An output behind a symbolic link that leads nowhere (to a missing path, or round a loop) is refused before any
work, whether the link is the output itself or a folder above it: writing it would fail only at the end, with
'file exists', or not resolve at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench import store
from cladebench.errors import CladebenchError


@pytest.fixture
def links(tmp_path: Path) -> Path:
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "real").mkdir()
    (tmp_path / "good").symlink_to(tmp_path / "real")
    return tmp_path


@pytest.mark.parametrize("out", ["dangling", "dangling/run", "dangling/a/b", "loop", "loop/run"])
@pytest.mark.parametrize("folder", [True, False])
def test_an_output_through_a_link_to_nothing_is_refused(links: Path, out: str, folder: bool) -> None:
    link = out.split("/")[0]
    with pytest.raises(CladebenchError, match=f"{links / link} is a symbolic link to .*, which leads nowhere"):
        store.check_writable(links / out, folder=folder)


def test_an_output_through_a_working_link_is_written(links: Path) -> None:
    store.check_writable(links / "good" / "run", folder=True)
    store.check_writable(links / "good", folder=True)
    assert list((links / "real").iterdir()) == []  # the probe leaves nothing
