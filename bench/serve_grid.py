"""How long a page of 100 thumbnails of `cladebench serve` takes on a 100k-row dataset: first render against the
cached one, over real HTTP; then a page of 100 cached thumbnails, the image page and the embedding map's first draw
each against the page's own data query.

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

Then, each against the Lance read the page itself makes (its "data query", timed in this process on the server's
own state, so the ratio is what the page adds to its data: HTTP, templates, thumbnails, neighbours, JSON):

- **grid, 100 cached thumbnails**: the page's HTML and its 100 thumbnails over 6 connections, against the page's
  rows read (``offset``/``limit``) and counted;
- **image page**: a row's page (its neighbours in the embedding column, exact: the bench builds no index), against
  the read of that row: the first (the column's unit vectors read into memory), another row (ranked in memory, its
  neighbours' thumbnails made), the same row again, and the same again with nothing kept in memory (the exact scan
  from Lance that every image page made before: the baseline of the line ``exact scan / in memory``);
- **map, first draw**: the first ``/map/points`` of the column (PCA computed and cached), against reading the
  column's vectors; and the same on a new server (the cached projection read).

The rows carry an ``emb_bench`` column of ``--dim`` floats (each species' direction plus noise).

    .venv/bin/python bench/serve_grid.py [--rows 100000] [--distinct 200] [--size 640] [--dim 512]
                                         [--repeats 5] [--seed 0] [--workdir DIR]
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
import numpy as np
import pyarrow as pa

from _args import positive_int
from cladebench import store

COLUMN = "emb_bench"
"""The embedding column the bench writes (its model named ``bench``)."""


def build(path: Path, rows: int, distinct: int, size: int, seed: int, dim: int) -> None:
    """``rows`` observations of the synthetic world with ``distinct`` rendered photos cycled over them, and an
    embedding column of ``dim`` floats: each species a random direction, each row that direction plus noise."""
    from cladebench.store.schema import embedding_field
    from cladebench.synthetic.render import encode_image
    from cladebench.synthetic.world import make_world

    world = make_world()
    observations = world.observations(rows, seed=seed)
    photos = [encode_image(world.render(o.species, seed=o.image_seed, size=size)) for o in observations[:distinct]]
    rng = np.random.default_rng(seed)
    directions: dict[str, np.ndarray] = {}
    field = embedding_field(COLUMN, dim, {"model": "bench"})
    chunk = 10_000
    batches = []
    for start in range(0, rows, chunk):
        part = observations[start:start + chunk]
        small = _table_without_images(world, part)
        images = pa.array([photos[(start + i) % distinct] for i in range(len(part))], pa.large_binary())
        small = small.set_column(small.schema.get_field_index("image"), "image", images)
        centres = np.stack([directions.setdefault(str(o.species), rng.standard_normal(dim).astype(np.float32))
                            for o in part])
        vectors = centres + 0.7 * rng.standard_normal((len(part), dim)).astype(np.float32)
        batches.append(small.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim)))
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
        # A page holds 100 thumbnails; a filtered one of a small dataset (--rows under a few thousand) fewer.
        assert 0 < len(sources) <= 100, f"{path}: {len(sources)} thumbnails, expected 1 to 100"
        list(pool.map(lambda s: client.get(f"{base}/thumb/{s}").raise_for_status(), sources))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=positive_int, default=100_000)
    parser.add_argument("--distinct", type=positive_int, default=200)
    parser.add_argument("--size", type=positive_int, default=640)
    parser.add_argument("--dim", type=positive_int, default=512, help="width of the embedding column")
    parser.add_argument("--repeats", type=positive_int, default=5)
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
        dataset = work / f"grid-{args.rows}-{args.dim}.lance"
        if not dataset.exists():
            started = time.perf_counter()
            build(dataset, args.rows, args.distinct, args.size, args.seed, args.dim)
            print(f"built {args.rows:,} rows ({args.distinct} photos of {args.size} px repeated) "
                  f"in {time.perf_counter() - started:.1f} s")
        from cladebench.serve.config import ServeConfig
        from cladebench.serve.server import open_state, start

        ds = store.open_dataset(dataset)
        genus = ds.to_table(columns=["genus"], offset=args.rows // 2, limit=1).column(0)[0].as_py()
        deep = max(1, min(500, args.rows // 100))  # page 500 of 100k rows; the last full page of fewer
        pages = {"page 1": "/", f"page {deep}": f"/?page={deep}", f"genus {genus}": f"/?genus={genus}",
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
        against_data_query(work, dataset, args.repeats, args.rows)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.perf_counter() - wall:.0f} s")
    return 0


def _serving(work: Path, dataset: Path, name: str) -> tuple[object, object, str]:
    """A server over ``dataset`` in a thread, with empty thumbnail and map caches: (Started, thread, base URL)."""
    from cladebench.serve.config import ServeConfig
    from cladebench.serve.server import open_state, start

    config = ServeConfig(dataset=str(dataset), port=0)
    state = open_state(config)
    state.thumbnail_root = work / f"thumbs-{name}"
    state.map_root = work / f"maps-{name}"
    for folder in (state.thumbnail_root, state.map_root):
        shutil.rmtree(folder, ignore_errors=True)
    server = start(config, state)
    thread = server.run_in_thread()
    base = server.url.rstrip("/")
    while True:  # wait for the socket to be served (it is bound already)
        try:
            httpx.get(base + "/healthz", timeout=30)
            return server, thread, base
        except httpx.TransportError:
            time.sleep(0.01)


def _stop(server: object, thread: object) -> None:
    server.stop()  # type: ignore[attr-defined]
    thread.join()  # type: ignore[attr-defined]
    server.sock.close()  # type: ignore[attr-defined]


def _timed(call: object) -> float:
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - start


def _one_repeat(work: Path, dataset: Path, name: str, rows: int) -> tuple[dict[str, tuple[float, float]], int]:
    """Seconds of each page and of its data query, on fresh servers (empty caches); and the bytes of unit vectors
    the first server kept in memory."""
    from cladebench.serve import vectors
    from cladebench.serve.browse import count, page_rows
    from cladebench.serve.image import read_row
    from cladebench.store.embeddings import valid_embeddings

    server, thread, base = _serving(work, dataset, name)
    state = server.state  # type: ignore[attr-defined]
    first, other = (state.dataset.to_table(columns=["uuid"], offset=at, limit=1).column(0)[0].as_py()
                    for at in (rows // 2, rows // 3))
    columns = [c for c in state.columns if c != "image" and c not in vectors.columns_of(state)]

    def image_page(client: httpx.Client, uuid: str) -> tuple[float, float]:
        return (_timed(lambda: client.get(f"{base}/image/{uuid}").raise_for_status()),
                _timed(lambda: read_row(state, uuid, columns)))

    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=6)) as client, ThreadPoolExecutor(6) as pool:
        fetch_page(client, base, "/?page=7", pool, thumbnails=True)  # thumbnails made, counts kept
        grid = fetch_page(client, base, "/?page=7", pool, thumbnails=True)
        grid_query = _timed(lambda: (count(state, None), page_rows(state, None, 7).num_rows))
        image_first = image_page(client, first)  # the column's vectors read into memory, neighbours' thumbnails made
        image_next = image_page(client, other)  # another row: from memory; its neighbours' thumbnails made
        image_again = image_page(client, other)  # the same row again: from memory, thumbnails on disk
        kept = sum(v.nbytes for v in state.memo[("unit-vectors",)].values() if v is not None)
        # The same again as before the vectors were kept: the exact scan of the column from Lance on every page.
        budget, vectors.VECTOR_MEMORY = vectors.VECTOR_MEMORY, 0
        state.memo.pop(("unit-vectors",))
        image_scan = image_page(client, other)
        vectors.VECTOR_MEMORY = budget
        first_map = _timed(lambda: client.get(f"{base}/map/points?column={COLUMN}").raise_for_status())
        map_query = _timed(lambda: valid_embeddings(state.dataset, COLUMN))
    _stop(server, thread)
    server, thread, again = _serving(work, dataset, f"{name}-again")
    shutil.copytree(work / f"maps-{name}", work / f"maps-{name}-again", dirs_exist_ok=True)
    cached_map = _timed(lambda: httpx.get(f"{again}/map/points?column={COLUMN}", timeout=600).raise_for_status())
    _stop(server, thread)
    return {"grid, 100 cached thumbnails": (grid, grid_query),
            "image page, first (read vectors)": image_first, "image page, next row": image_next,
            "image page, same row again": image_again, "  the same, exact scan (before)": image_scan,
            "map, first draw (PCA)": (first_map, map_query),
            "map, cached draw (new server)": (cached_map, map_query)}, kept


def against_data_query(work: Path, dataset: Path, repeats: int, rows: int) -> None:
    """Each page against its own data query: the grid of 100 cached thumbnails, the image page, the map's first
    draw (and its cached draw on a new server)."""
    print(f"\n{'page':<32} {'page (ms)':>10} {'data query (ms)':>16} {'page/query':>11}")
    measured: dict[str, tuple[list[float], list[float]]] = {}
    kept = []
    for repeat in range(repeats):
        timings, kept_bytes = _one_repeat(work, dataset, f"query-{repeat}", rows)
        kept.append(kept_bytes)
        for name, (page, query) in timings.items():
            pages, queries = measured.setdefault(name, ([], []))
            pages.append(page)
            queries.append(query)
    for name, (pages, queries) in measured.items():
        page_ms, query_ms = 1000 * statistics.median(pages), 1000 * statistics.median(queries)
        print(f"{name:<32} {page_ms:>10.0f} {query_ms:>16.1f} {page_ms / query_ms:>10.1f}x")
    scan, memory = (statistics.median(measured[name][0]) for name in ("  the same, exact scan (before)",
                                                                      "image page, same row again"))
    print(f"image page, exact scan / in memory: {scan / memory:.1f}x; unit vectors kept: "
          f"{max(kept) / 1e6:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
