"""Every spelling of true that huggingface_hub takes for ``HF_HUB_OFFLINE`` ends a fetching command as ``=1`` does:
the same one line and exit code, never the Hub's own error as an internal one (exit 70)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.benchmarks import BENCHMARKS
from cladebench.cli import main
from cladebench.environment import hub_offline

SPELLINGS = ("true", "yes", "TRUE", "On", " 1 ")
ENDPOINT = "bioclip-2"
"""A model every task takes and that is never loaded: each benchmark stops at its data, before any model loads."""


def _eval(benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
          offline: str) -> tuple[int, str]:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "empty-cache"))  # nothing built
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    capsys.readouterr()
    code = main(["eval", benchmark, "--model", ENDPOINT, "--out", str(tmp_path / f"out-{offline.strip()}")])
    return code, capsys.readouterr().err.replace(str(tmp_path / f"out-{offline.strip()}"), "OUT")


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_an_unbuilt_benchmark_offline_is_refused_alike_for_every_spelling(
        benchmark: str, spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    expected_code, expected = _eval(benchmark, tmp_path, monkeypatch, capsys, "1")
    assert expected_code in (1, 5) and "HF_HUB_OFFLINE is set" in expected, expected
    code, said = _eval(benchmark, tmp_path, monkeypatch, capsys, spelling)
    assert (code, said) == (expected_code, expected)
    assert "internal error" not in said and "Traceback" not in said


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off"])
def test_what_is_not_true_is_not_offline(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # huggingface_hub read the suite's own =1 at import
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert not hub_offline()
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "Yes")  # transformers' name for the same rule
    assert hub_offline()


@pytest.mark.parametrize("spelling", ("1", *SPELLINGS))
def test_a_hub_dataset_offline_is_refused_alike_for_every_spelling(spelling: str, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", spelling)
    assert main(["info", "hf://datasets/imageomics/fine-grained-challenges/data/challenges.lance"]) == 5
    said = capsys.readouterr().err.strip()
    assert said == ("cladebench info: error: cannot open hf://datasets/imageomics/fine-grained-challenges/data/"
                    "challenges.lance: HF_HUB_OFFLINE is set, so hf:// datasets are not fetched. Unset it when "
                    "online, or pass a local copy (see `cladebench subset`).")
