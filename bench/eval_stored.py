"""``cladebench eval zeroshot`` from stored image vectors with cached text embeddings, against its numpy core.

The question this answers: once a dataset's images are embedded and its label set's text embeddings are cached,
how much does the whole command cost beyond the arithmetic it exists for? The baseline, measured in this process
on the same vectors: the classification (unit vectors, logits at the model's scale, softmax, top-5) and the
metrics (top-1/top-5 with Wilson intervals, balanced accuracy with its bootstrap) as
:func:`cladebench.tasks.zeroshot.zero_shot_metrics` computes them. The candidate: ``cladebench eval zeroshot`` as
a fresh process (interpreter start, imports, the plan, reading the vectors, the cached label embeddings, scoring,
the run record), second run, so every label is cached. It also reports whether that process imported torch (it
should not: the model is built only when its weights are needed). The package's bytecode is compiled first, as an
installed one is (pip compiles it; a checkout writes it on its first run unless ``PYTHONDONTWRITEBYTECODE`` is
set), so the figure is the wait a researcher has, not a recompilation of every module on each run.

The cached command is timed twice: in this environment, and with pandas unimportable, as a research install has
it. No dependency of cladebench's nor of its ``clip``, ``report``, ``serve`` and ``taxonomy`` extras needs pandas
(``pip install --dry-run --report`` of those lists 88 packages, none of them pandas); only the ``dev`` extra's test
references (statsmodels, datasets) bring it, and where it is installed ``pyarrow.dataset``, which Lance imports,
imports it too (0.2 s).

Run: ``python bench/eval_stored.py [--images 10000] [--species 1000] [--repeats 3]``. The tiny open_clip model of
the tests stands in for a real one (its text tower encodes the labels once, before timing); vectors are its width.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from _args import positive_int

WITHOUT = ("pandas",)
"""What a research install lacks that this (dev) environment has and the command would import."""

SCRIPT = """
import json, sys, time
start = time.perf_counter()


class Unimportable:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in UNIMPORTABLE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, Unimportable())
from cladebench.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "seconds": time.perf_counter() - start, "torch": "torch" in sys.modules,
                  "pandas": "pandas" in sys.modules}), file=sys.stderr)
"""


def write_dataset(path: Path, images: int, species: int, dim: int, model_id: str, seed: int) -> None:
    """A dataset of ``images`` rows over ``species`` made-up species in 50 genera, with random unit vectors in
    the model's embedding column (the numbers are chance; the cost is what is measured)."""
    from cladebench import store
    from cladebench.models.spec import column_key

    rng = np.random.default_rng(seed)
    which = rng.integers(species, size=images)
    genus = [f"Genus{s % 50}" for s in which]
    vectors = rng.standard_normal((images, dim)).astype(np.float32)
    table = pa.table({
        "uuid": [f"u{i:07d}" for i in range(images)],
        "image": pa.array([b""] * images, pa.large_binary()),  # the vectors are given: no image is decoded
        "kingdom": ["Animalia"] * images, "phylum": ["Chordata"] * images, "class": ["Aves"] * images,
        "order": ["Passeriformes"] * images, "family": [f"Family{s % 10}" for s in which], "genus": genus,
        "species": [f"{g} sp{s}" for g, s in zip(genus, which, strict=True)],
    })
    field = store.embedding_field(column_key(model_id), dim, {"model": model_id})
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim))
    store.write_dataset(table, path)


def numpy_core(dataset: Path, model_id: str, scale: float, text: np.ndarray, labels: list[str]) -> float:
    """Seconds of the arithmetic alone: classify the stored vectors against the label embeddings and compute
    zero-shot's metrics from the hits, as the task does, on arrays already in memory."""
    from cladebench import store
    from cladebench.metrics import accuracy, balanced_accuracy, bootstrap_ci
    from cladebench.models.spec import column_key
    from cladebench.tasks.streaming import top_k_indices
    from cladebench.tasks.zeroshot import BALANCED_ACCURACY_RESAMPLES

    data = store.read(store.open_dataset(dataset), columns=["species", "emb_" + column_key(model_id)])
    vectors = np.stack(data.column(1).to_numpy(zero_copy_only=False)).astype(np.float32)
    index = {name: i for i, name in enumerate(labels)}
    targets = np.array([index[s] for s in data.column("species").to_pylist()])
    start = time.perf_counter()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    logits = scale * unit @ text.T
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    top = top_k_indices(probs, 5)
    accuracy(top[:, 0] == targets)
    accuracy((top == targets[:, None]).any(axis=1))
    bootstrap_ci(lambda w: balanced_accuracy(targets, top[:, 0], weights=w), n_examples=len(targets),
                 n_resamples=BALANCED_ACCURACY_RESAMPLES)  # as many resamples as the task draws
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=positive_int, default=10_000)
    parser.add_argument("--species", type=positive_int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=positive_int, default=3,
                        help="runs of the cached command and of the core; the medians are compared")
    args = parser.parse_args()

    import compileall

    import cladebench
    from cladebench.models.deferred import DeferredEncoder
    from cladebench.models.registry import resolve_model
    from cladebench.models.text import class_text_embeddings
    from cladebench.models.tiny import write_tiny_model

    compileall.compile_dir(Path(cladebench.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        env = {**os.environ, "CLADEBENCH_CACHE_DIR": str(root / "cache"), "HF_HUB_OFFLINE": "1"}
        os.environ["CLADEBENCH_CACHE_DIR"] = env["CLADEBENCH_CACHE_DIR"]
        model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=1))
        encoder = DeferredEncoder(resolve_model(model), "cpu")
        dataset = root / "bench.lance"
        write_dataset(dataset, args.images, args.species, encoder.dim, model, args.seed)
        arguments = ["eval", "zeroshot", str(dataset), "--model", model, "--device", "cpu", "--group-by", "none",
                     "--name-style", "sci"]

        def timed(unimportable: tuple[str, ...]) -> dict:
            script = f"UNIMPORTABLE = {unimportable!r}\n" + SCRIPT
            result = subprocess.run([sys.executable, "-c", script, *arguments, "--out", str(root / f"run{len(runs)}")],
                                    capture_output=True, text=True, env=env, check=False)
            measured = json.loads(result.stderr.strip().splitlines()[-1])
            assert measured["code"] == 0, result.stderr
            runs.append(measured)
            return measured

        runs: list[dict] = []
        first = timed(())
        # Alternated, so a change in the machine's load falls on both alike.
        here, research = zip(*[(timed(()), timed(WITHOUT)) for _ in range(args.repeats)], strict=True)
        record = json.loads((root / "run1" / "run.json").read_text())
        labels = record["provenance"]["label_set"]["labels"]
        text = class_text_embeddings(encoder, labels, "bioclip")
        core = statistics.median(
            numpy_core(dataset, model, float(record["provenance"]["model"]["logit_scale"]), text, labels)
            for _ in range(args.repeats))
    lines = [("first (labels encoded)", first),
             (f"cached, median of {args.repeats}", _median(here)),
             ("cached, as a research install", _median(research))]
    print(f"eval zeroshot, {args.images:,} stored vectors x {len(labels):,} labels, dim {encoder.dim}")
    print(f"  numpy core (classify + metrics, in this process, median of {args.repeats}): {core:6.2f} s")
    for attempt, measured in lines:
        print(f"  whole command, {attempt:<30} {measured['seconds']:6.2f} s  ratio {measured['seconds'] / core:5.1f}x"
              f"  torch imported: {measured['torch']}  pandas imported: {measured['pandas']}")
    print(f"  (a research install: {', '.join(WITHOUT)} not importable, as none of cladebench's dependencies and "
          "extras but dev's test references brings it)")


def _median(runs: Sequence[dict]) -> dict:
    return {"seconds": statistics.median(m["seconds"] for m in runs), "torch": any(m["torch"] for m in runs),
            "pandas": any(m["pandas"] for m in runs)}


if __name__ == "__main__":
    main()
