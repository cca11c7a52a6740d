"""Photos for the demo model: drawn from the synthetic world in forked worker processes.

Why it exists: drawing ten thousand training photos (and a thousand evaluation photos) is most of a
training's time outside the optimizer; spreading it over processes pays, and every photo is a pure
function of its species and seed, so the result never depends on the number of workers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cladebench.demo.model.config import DemoModelConfig

if TYPE_CHECKING:
    from PIL import Image

    from cladebench.synthetic import Observation, World, WorldConfig


# --- training photos -----------------------------------------------------------------------------


_WORKER_WORLD: World | None = None


def _init_render_worker(world_config: WorldConfig) -> None:
    global _WORKER_WORLD
    from cladebench.synthetic import make_world

    _WORKER_WORLD = make_world(world_config)


def _render_items(items: Sequence[tuple[int, int]], render_size: int, image_size: int,
                  world: World | None = None) -> np.ndarray:
    """Draw photos (species index, image seed) at ``render_size`` and shrink them as the model's
    preprocessing does (shortest side to ``image_size``, bicubic, centre crop); uint8 (n, S, S, 3)."""
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Resize

    world = world or _WORKER_WORLD
    assert world is not None, "render worker not initialised"
    # open_clip's eval transform for resize_mode "shortest", without ToTensor/Normalize (done per batch).
    shrink = Compose([Resize(image_size, interpolation=InterpolationMode.BICUBIC), CenterCrop(image_size)])
    out = np.empty((len(items), image_size, image_size, 3), dtype=np.uint8)
    for i, (species, seed) in enumerate(items):
        out[i] = np.asarray(shrink(world.render(species, seed=seed, size=render_size)))
    return out


def render_full(items: Sequence[tuple[int, int]]) -> list[Image.Image]:
    """Photos (species index, image seed) at the world's full size, in a worker."""
    assert _WORKER_WORLD is not None, "render worker not initialised"
    return [_WORKER_WORLD.render(species, seed=seed) for species, seed in items]


def in_workers(world: World, chunks: Sequence[object], work: Callable[..., object], workers: int,
                local: Callable[[Any], object], *args: object) -> Iterator[Any]:
    """``work(chunk, *args)`` for every chunk, in order, in ``workers`` forked processes (else ``local(chunk)``
    here).

    Forked, not spawned: a spawned worker re-imports the caller's main script, which breaks any script
    without an ``if __name__ == "__main__"`` guard. The children only draw with numpy and PIL, never
    touching torch's thread pool (which a forked child must not use). Where fork does not exist
    (Windows) everything runs in this process. Each photo is a pure function of its species and seed,
    so results never depend on the number of workers.
    """
    import multiprocessing

    if workers <= 1 or len(chunks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for chunk in chunks:
            yield local(chunk)
        return
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_render_worker,
                             initargs=(world.config,)) as pool:
        futures = [pool.submit(work, chunk, *args) for chunk in chunks]
        for future in futures:
            yield future.result()


def render_pool(world: World, observations: Sequence[Observation], config: DemoModelConfig,
                 progress: bool) -> np.ndarray:
    """Every training photo, preprocessed to uint8 pixels (n, S, S, 3), drawn in worker processes."""
    from cladebench.progress import progress_bar

    items = [(o.species.index, o.image_seed) for o in observations]
    chunks = [items[i:i + 256] for i in range(0, len(items), 256)]
    parts: list[np.ndarray] = []
    with progress_bar(total=len(items), desc="rendering training photos", unit="img", enabled=progress,
                      leave=False) as bar:
        local = functools.partial(_render_items, render_size=config.render_size, image_size=config.image_size,
                                  world=world)
        for part in in_workers(world, chunks, _render_items, config.workers, local, config.render_size,
                                config.image_size):
            parts.append(part)
            bar.update(len(part))
    return np.concatenate(parts)


