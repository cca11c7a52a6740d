"""bench/gpu_embed.py, the bf16 GPU throughput of cladebench.embed against the model's pure forward pass: it refuses
cleanly where there is no CUDA device, and its steps run end to end on the CPU (``--device cpu``), so the script is
known to work before a GPU is at hand. No figure is checked: these tests time nothing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from cladebench.embed import EmbedConfig

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_embed.py"


@pytest.fixture
def gpu_embed(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # as when run: embed_throughput beside it
    spec = importlib.util.spec_from_file_location("gpu_embed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_says_so_in_one_line_and_exits_1(gpu_embed, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(gpu_embed, "cuda_available", lambda: False)
    assert gpu_embed.main(["--workdir", str(tmp_path / "work")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [gpu_embed.NO_CUDA]
    assert "no CUDA device" in gpu_embed.NO_CUDA
    assert not (tmp_path / "work").exists()  # nothing built before the refusal


def test_the_script_run_without_cuda_refuses_without_a_traceback():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == ["gpu_embed: no CUDA device (torch.cuda.is_available() is False); "
                                                  "nothing measured"]


def test_its_steps_run_on_the_cpu_with_the_tiny_model(gpu_embed, capsys, tmp_path):
    # The embed part alone: the zero-shot part has its test below, at a size the CPU does in a moment (its default,
    # the whole taxonomy, is the device's work).
    assert gpu_embed.main(["--device", "cpu", "--part", "embed", "--model", "tiny", "--images", "24",
                           "--batch-size", "8", "--repeats", "1", "--workers", "0", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| tiny | bf16 | 8 | 24 |" in out
    assert "embed / forward = " in out
    # The embed runs wrote their copies of the dataset into the workdir and removed them.
    assert not list(tmp_path.glob("embed-*.lance"))


def test_it_measures_embed_with_the_configs_precision_and_device(gpu_embed):
    args = gpu_embed.parse_args([])
    assert (args.device, args.precision, args.batch_size) == ("cuda", "bf16", 256)
    config = EmbedConfig(dataset="x.lance", model="m", batch_size=args.batch_size, device=args.device,
                         precision=args.precision, workers=args.workers)
    assert config.workers is None  # embed sizes its decoding workers to the GPU itself


def test_its_streamed_zero_shot_runs_on_the_cpu_and_agrees_with_the_threads(gpu_embed, capsys):
    assert gpu_embed.main(["--device", "cpu", "--part", "zeroshot", "--zs-images", "40", "--zs-species", "3000",
                           "--zs-check", "40", "--zs-synthetic"]) == 0
    out = capsys.readouterr().out
    assert "| zero-shot, top-5 and 6 ranks rolled up | 40 | 3,000 |" in out
    assert "zero-shot streamed / matrix floor = " in out
    assert "top-5 identical for 40 of 40" in out and "a different top taxon 0 time(s)" in out
