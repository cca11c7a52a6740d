"""``embed``'s rate is of embedding (decoding and encoding the images), not of the whole command: loading a model
takes as long for 15 photos as for 15,000, and counted in, it made a small run's rate say nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import models
from cladebench.cli import main
from helpers.images import picture, write_images

LOADING = 1.5
"""Seconds the model's loading is made to take."""


def test_the_rate_leaves_out_loading_the_model(tmp_path: Path, tiny_model: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.embed import EmbedConfig, embed_dataset

    real = models.load_encoder

    def slow_load(*args: object, **kwargs: object) -> object:
        time.sleep(LOADING)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(models, "load_encoder", slow_load)
    path = tmp_path / "few.lance"
    write_images(path, {f"r{i}": picture(i) for i in range(6)})
    summary = embed_dataset(EmbedConfig(dataset=str(path), model=tiny_model, column="emb_tiny", workers=0,
                                        device="cpu", progress=False))
    assert summary.seconds - summary.embedding_seconds >= LOADING
    # embedding_seconds is kept to the millisecond, the rate from the unrounded time: equal within that rounding
    seconds = summary.embedding_seconds
    assert seconds > 0 and summary.encoded_now / (seconds + 5e-4) <= summary.rows_per_second <= (
        summary.encoded_now / max(seconds - 5e-4, 1e-9))
    assert summary.rows_per_second > summary.encoded_now / summary.seconds
    assert main(["embed", str(path), "--model", tiny_model, "--column", "emb_again", "--workers", "0",
                 "--device", "cpu", "--no-progress"]) == 0
    assert "images/s of embedding" in capsys.readouterr().out
