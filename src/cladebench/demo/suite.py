"""The demo's sample suite: the datasets built from the synthetic world, and their embeddings by the two models.

Why it exists: every later step reads these datasets and columns; they are built from the same public functions a
researcher calls (synthetic world -> canonical tables -> Lance datasets -> indices, tags, subsets -> embed), so when
the demo runs, that flow works end to end.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from cladebench import store
from cladebench.demo.steps import DEMO_STEPS, DemoContext, DemoModel, dataset_summary, in_batches, say
from cladebench.store.sql import sql_literal
from cladebench.taxonomy import Rank

if TYPE_CHECKING:
    import lance

    from cladebench.synthetic import World


def _write_world_dataset(ctx: DemoContext, name: str, rows: Callable[..., pa.Table], total: int, batch: int,
                         image_format: str, *, then: Iterable[pa.Table] = ()) -> lance.LanceDataset:
    """The demo dataset ``name``: ``total`` rows of the world's draw ``ctx.config.seed`` made by ``rows`` (a table
    method of the world) ``batch`` at a time, and after them the tables of ``then``, written as one dataset;
    returns it opened."""
    seed = ctx.config.seed
    tables = in_batches(lambda start, n: rows(n, seed=seed, image_format=image_format, start=start),
                        total, batch, f"{name} images")
    return store.write_dataset(itertools.chain(tables, then), ctx.dataset_path(name))


GENUS_ONLY_ROWS = 8
"""Rows of the fine-grained suite labelled to genus only, after the others, as the published table's camera-trap
rows are: never scored at species (each run counts them as left out), first in ``serve``'s review queue."""


def genus_only_genus(world: World, images: int, seed: int) -> str:
    """The genus of the genus-only rows: the one the draw has most photos of (ties: the first name), so its
    species are in the suite's label sets and the runs' suggestions for those rows can be checked against them."""
    counts = Counter(o.species.lineage.names[Rank.GENUS] or "" for o in world.observations(images, seed=seed))
    return max(sorted(counts), key=counts.__getitem__)


@DEMO_STEPS.register("fine-grained")
def _fine_grained(ctx: DemoContext) -> dict[str, object]:
    """Single-organism WebP images with a challenge group, as the Fine-Grained Challenges table has, and a few
    rows of one genus labelled to the genus only."""
    seed = ctx.config.seed
    genus = genus_only_genus(ctx.world, ctx.config.images, seed)
    genus_only = ctx.world.genus_only_table(GENUS_ONLY_ROWS, genus=genus, seed=seed, image_format="webp")
    ds = _write_world_dataset(ctx, "fine-grained", ctx.world.to_table, ctx.config.images, 64, "webp",
                              then=[genus_only])
    store.create_scalar_index(ds, "uuid", "BTREE")
    store.create_scalar_index(ds, "challenge_group", "BITMAP")
    path = ctx.dataset_path("fine-grained")
    store.tag(store.open_dataset(path), "demo")
    return {**dataset_summary(path), "genus_only": {"genus": genus, "rows": genus_only.num_rows}}


@DEMO_STEPS.register("co-observed")
def _co_observed(ctx: DemoContext) -> dict[str, object]:
    """Photos showing two organisms of different species, as iNat Co-Observed has."""
    _write_world_dataset(ctx, "co-observed", ctx.world.pair_table, ctx.config.pairs, 32, "jpeg")
    return dataset_summary(ctx.dataset_path("co-observed"))


@DEMO_STEPS.register("subset")
def _subset(ctx: DemoContext) -> dict[str, object]:
    """One challenge group materialised with filter and projection pushed down, as the cards show."""
    source = store.open_dataset(ctx.dataset_path("fine-grained"))
    groups = store.read(source, columns=["challenge_group"]).column(0).to_pylist()
    group = max(sorted(set(groups)), key=groups.count)
    path = ctx.dataset_path("fine-grained-subset")
    where = f"challenge_group = {sql_literal(group)}"
    store.subset(ctx.dataset_path("fine-grained"), path, where=where,
                 columns=["image", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                          "scientific_name", "challenge_group"])
    return {**dataset_summary(path), "where": where}


DEMO_MODEL_NOTICE = (
    "the demo model is a tiny CLIP trained on this synthetic world (cached after its first training): "
    "its accuracies show the pipeline carries real signal, and say nothing about real organisms"
)

DEMO_LABEL = "demo"
"""The label of the demo model's runs (and the model alias that names it)."""
EARLY_LABEL = "demo · early"
"""The label of its early checkpoint's runs."""


@DEMO_STEPS.register("embed")
def _embed(ctx: DemoContext) -> dict[str, object]:
    """Encode every demo image once with the demo model into ``emb_demo``, and the fine-grained images with the
    demo model's early checkpoint (the same training, stopped early) into ``emb_demo_early``: two models whose
    runs on the same images the report can rank."""
    try:
        import open_clip  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return {"skipped": "torch and open_clip are not installed: pip install 'cladebench[clip]'"}
    from cladebench.cache import record_demo_model
    from cladebench.demo.model import DemoModelConfig, demo_model_id, early_config, trained_steps
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.models import load_encoder

    say(f"[demo] note: {DEMO_MODEL_NOTICE}")
    final = DemoModelConfig(world_seed=ctx.config.seed)
    early = early_config(final)
    models = [DemoModel(label=DEMO_LABEL, model=demo_model_id(config=final), column="emb_demo", slug="demo"),
              DemoModel(label=EARLY_LABEL, model=demo_model_id(config=early), column="emb_demo_early",
                        slug="demo-early")]
    record_demo_model(models[0].model.removeprefix("local-dir:"))  # `--model demo` is now the demo's model
    datasets: dict[str, dict[str, object]] = {}
    for model, names in ((models[0], ("fine-grained", "co-observed")), (models[1], ("fine-grained",))):
        encoder = load_encoder(model.model, device="cpu")
        for name in names:
            summary = embed_dataset(
                EmbedConfig(dataset=str(ctx.dataset_path(name)), model=model.model, column=model.column,
                            device="cpu"), encoder=encoder)
            datasets[f"{name} {model.column}"] = {"valid": summary.valid, "failed": summary.failed,
                                                  "rows_per_second": summary.rows_per_second,
                                                  "column": model.column, "model": model.model}
    ctx.models = models
    return {"model": models[0].model, "weights": "trained on the synthetic world", "notice": DEMO_MODEL_NOTICE,
            "column": models[0].column, "datasets": datasets,
            "models": [{"label": m.label, "model": m.model, "column": m.column} for m in models],
            "early_step": f"{trained_steps(early)} of {early.steps} training steps"}
