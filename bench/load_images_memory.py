"""Peak memory of ``load images`` on a folder tree as the folder grows: the load streams records a batch at a
time, so the peak should stay about flat while the images' total size grows.

For each size, a folder of ``N`` noise JPEGs (hard to compress: about 0.4 MB each at 640x480) in 8 species folders
is written, then loaded in a fresh process (so ``ru_maxrss`` is that load's own peak), with the peak resident set
size read before (the interpreter, pyarrow, lance and the backbone's reader imported) and after. The ratio printed
is the growth of the largest size over the growth of the smallest, beside the ratio of their images' bytes: 1.0
against 4.0 means memory does not follow the data.

    .venv/bin/python bench/load_images_memory.py [--sizes 100 400] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_CHILD = """
import json, resource, sys
import lance, pyarrow, pyarrow.dataset
from cladebench.curate.sources.images.build import build_images_dataset
from cladebench.taxonomy.resolve import resolve_labels
resolve_labels(["Vulpes vulpes"])  # the backbone's first read, before the peak is taken
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
summary = build_images_dataset(sys.argv[1], sys.argv[2])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"before": before, "after": after, "written": summary.written}))
"""
SPECIES = ("Vulpes vulpes", "Canis lupus", "Ursus arctos", "Bos taurus", "Morus alba", "Quercus robur",
           "Bufo bufo", "Larus argentatus")


def write_folder(root: Path, count: int, seed: int) -> int:
    from PIL import Image

    rng = np.random.default_rng(seed)
    total = 0
    for i in range(count):
        folder = root / SPECIES[i % len(SPECIES)]
        folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
        (folder / f"IMG_{i:05d}.jpg").write_bytes(buffer.getvalue())
        total += len(buffer.getvalue())
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400], help="images per folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"load_images_memory: python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    growth = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        for size in args.sizes:
            folder = Path(work) / f"photos-{size}"
            size_mb = write_folder(folder, size, args.seed) / 2**20
            t0 = time.monotonic()
            done = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(Path(work) / f"out-{size}")],
                                  capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            growth[size] = (result["after"] - result["before"], size_mb)
            print(f"{size:6d} images, {size_mb:6.0f} MB: peak RSS {result['before']:.0f} -> {result['after']:.0f} MiB "
                  f"(+{growth[size][0]:.0f} MiB), {result['written']} rows in {time.monotonic() - t0:.1f} s")
    small, large = growth[min(growth)], growth[max(growth)]
    print(f"growth ratio largest / smallest: {large[0] / max(small[0], 1):.2f} (images' bytes ratio "
          f"{large[1] / small[1]:.2f}); total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
