"""How long a page of 100 thumbnails of `cladebench serve` takes on a 100k-row dataset: first render against the
cached one, over real HTTP.

The dataset is built here: ``--rows`` rows of the synthetic world's observations (seven ranks, licenses, sources,
challenge groups), whose images are ``--distinct`` photos rendered at ``--size`` pixels and repeated over the rows
(every row still has its own uuid, so its own thumbnail to make). The server runs in this process on 127.0.0.1
(uvicorn in a thread) and is asked with httpx, as a browser would.

For each of four pages (the first page; page 500, deep in the table; one genus from the taxonomy tree; a free
``where`` filter on latitude) it measures:

- **first render** (the baseline): the page's HTML with an empty thumbnail cache and nothing counted yet for its
  filter: the page's rows read, 100 images read in one take, decoded and shrunk, the counts beside the grid scanned;
- **cached render** (the candidate): the same page again: thumbnails on disk, counts kept;
- **complete page**, cached: the HTML and its 100 thumbnails fetched over 6 connections, as Chromium does.

and prints the ratio first / cached. The cached numbers are what a user paging back and forth sees; the first
render is what a page costs once per dataset version.

    .venv/bin/python bench/serve_grid.py [--rows 100000] [--distinct 200] [--size 640] [--repeats 5] [--seed 0]
                                         [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pyarrow as pa

from cladebench import store


def build(path: Path, rows: int, distinct: int, size: int, seed: int) -> None:
    """``rows`` observations of the synthetic world with ``distinct`` rendered photos cycled over them."""
    from cladebench.synthetic.render import encode_image
    from cladebench.synthetic.world import make_world

    world = make_world()
    observations = world.observations(rows, seed=seed)
    photos = [encode_image(world.render(o.species, seed=o.image_seed, size=size)) for o in observations[:distinct]]
    chunk = 10_000
    batches = []
    for start in range(0, rows, chunk):
        part = observations[start:start + chunk]
        small = _table_without_images(world, part)
        images = pa.array([photos[(start + i) % distinct] for i in range(len(part))], pa.large_binary())
        batches.append(small.set_column(small.schema.get_field_index("image"), "image", images))
    store.write_dataset(pa.concat_tables(batches), path)


def _table_without_images(world: object, observations: list) -> pa.Table:
    """The canonical table of ``observations`` with a placeholder image (rendering 100k photos would take an hour)."""
    original = world.render
    try:
        from PIL import Image

        blank = Image.new("RGB", (1, 1))
        world.render = lambda *args, **kwargs: blank  # type: ignore[method-assign]
        return world.observations_table(observations)
    finally:
        world.render = original  # type: ignore[method-assign]


def fetch_page(client: httpx.Client, base: str, path: str, pool: ThreadPoolExecutor, *, thumbnails: bool) -> float:
    """Seconds for the HTML of ``path`` (and its thumbnails, when asked)."""
    start = time.perf_counter()
    page = client.get(base + path)
    page.raise_for_status()
    if thumbnails:
        sources = [chunk.split('"')[0] for chunk in page.text.split('src="/thumb/')[1:]]
        assert len(sources) == 100, f"{path}: {len(sources)} thumbnails, expected 100"
        list(pool.map(lambda s: client.get(f"{base}/thumb/{s}").raise_for_status(), sources))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=200)
    parser.add_argument("--size", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    import fastapi
    import lance
    import PIL

    wall = time.perf_counter()
    print(f"serve_grid: python {platform.python_version()}, {os.cpu_count()} CPUs, pylance {lance.__version__}, "
          f"fastapi {fastapi.__version__}, pillow {PIL.__version__}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="serve-grid-"))
    try:
        dataset = work / "grid.lance"
        if not dataset.exists():
            started = time.perf_counter()
            build(dataset, args.rows, args.distinct, args.size, args.seed)
            print(f"built {args.rows:,} rows ({args.distinct} photos of {args.size} px repeated) "
                  f"in {time.perf_counter() - started:.1f} s")
        from cladebench.serve.config import ServeConfig
        from cladebench.serve.server import open_state, start

        ds = store.open_dataset(dataset)
        genus = ds.to_table(columns=["genus"], offset=args.rows // 2, limit=1).column(0)[0].as_py()
        pages = {"page 1": "/", "page 500": "/?page=500", f"genus {genus}": f"/?genus={genus}",
                 "where latitude > 0": "/?where=latitude+%3E+0"}
        print(f"{'page':<24} {'first (ms)':>11} {'cached (ms)':>12} {'first/cached':>13} {'complete, cached (ms)':>22}")
        for name, path in pages.items():
            firsts, cached, complete = [], [], []
            for repeat in range(args.repeats):
                config = ServeConfig(dataset=str(dataset), port=0)
                state = open_state(config)  # nothing counted yet
                state.thumbnail_root = work / f"thumbs-{name}-{repeat}"  # an empty thumbnail cache
                shutil.rmtree(state.thumbnail_root, ignore_errors=True)
                server = start(config, state)
                thread = server.run_in_thread()
                base = server.url.rstrip("/")
                with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=6)) as client, \
                        ThreadPoolExecutor(6) as pool:
                    while True:  # wait for the socket to be served (it is bound already)
                        try:
                            client.get(base + "/healthz")
                            break
                        except httpx.TransportError:
                            time.sleep(0.01)
                    firsts.append(fetch_page(client, base, path, pool, thumbnails=False))
                    cached.append(statistics.median(fetch_page(client, base, path, pool, thumbnails=False)
                                                    for _ in range(3)))
                    complete.append(fetch_page(client, base, path, pool, thumbnails=True))
                server.stop()
                thread.join()
                server.sock.close()
            first_ms, cached_ms = 1000 * statistics.median(firsts), 1000 * statistics.median(cached)
            print(f"{name:<24} {first_ms:>11.0f} {cached_ms:>12.1f} {first_ms / cached_ms:>12.1f}x "
                  f"{1000 * statistics.median(complete):>22.0f}")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
