"""The one decision of whether an output may be written (:func:`cladebench.paths.write_refusal`)."""

from __future__ import annotations

from pathlib import Path

from cladebench.paths import LINK, NOT_OURS, TAKEN, WRONG_KIND, write_refusal


def test_each_reason_an_output_is_refused(tmp_path: Path) -> None:
    empty, full, file = tmp_path / "empty", tmp_path / "full", tmp_path / "file.txt"
    empty.mkdir()
    full.mkdir()
    (full / "x").write_text("x")
    file.write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(full)
    ours = lambda path: (path / "x").is_file()  # noqa: E731
    assert write_refusal(tmp_path / "absent", folder=True, overwrite=False) is None
    assert write_refusal(empty, folder=True, overwrite=False) is None
    assert write_refusal(full, folder=True, overwrite=False) == TAKEN
    assert write_refusal(full, folder=True, ours=ours) is None
    assert write_refusal(empty / "..", folder=True, ours=lambda path: False) == NOT_OURS
    assert write_refusal(file, folder=True) == WRONG_KIND and write_refusal(full, folder=False) == WRONG_KIND
    assert write_refusal(file, folder=False, ours=lambda path: False) == NOT_OURS
    assert write_refusal(file, folder=False, overwrite=False) == TAKEN
    assert write_refusal(link, folder=True, link_ok=False) == LINK and write_refusal(link, folder=True) is None
