"""What the embedding benchmark scripts set up alike: the line naming the machine and software a figure was
measured with, the work folder (a temporary one removed at the end unless ``--workdir`` names one to keep), and
the synthetic photos they encode.

Run as ``python bench/NAME.py``: the script's folder is on ``sys.path``, so ``from _setup import work_folder``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path


def add_seed_and_workdir(parser: argparse.ArgumentParser, workdir_help: str | None = None) -> None:
    """``--seed`` (of the synthetic data, default 0) and ``--workdir`` (default: a temporary folder)."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help=workdir_help)


def environment(script: str, packages: Sequence[str], device: str | None = None) -> str:
    """``SCRIPT: python V, N CPUs, DEVICE, package version, ...``; ``device`` defaults to torch's CPU threads."""
    if device is None:
        import torch

        device = f"torch threads {torch.get_num_threads()}"
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in packages)
    return f"{script}: python {platform.python_version()}, {os.cpu_count()} CPUs, {device}, {versions}"


@contextmanager
def work_folder(given: Path | None, prefix: str = "cladebench-bench-") -> Iterator[Path]:
    """``given`` (made when absent, kept), or a temporary folder removed when the block ends."""
    work = given or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if given is None:
            shutil.rmtree(work, ignore_errors=True)


def build_dataset(path: Path, n: int, seed: int) -> None:
    """Half JPEG, half WebP, 500 px on the longest side, as iNat "medium" photos."""
    from cladebench import store
    from cladebench.synthetic import WorldConfig, make_world

    world = make_world(WorldConfig(seed=seed, names="generated"))

    def tables():
        for start in range(0, n, 128):
            size = min(128, n - start)
            fmt = "webp" if (start // 128) % 2 else "jpeg"
            table = world.to_table(size, seed=seed, image_format=fmt, start=start)
            yield table.select(["uuid", "image", "image_format"])

    store.write_dataset(tables(), path)
