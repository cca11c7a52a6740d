"""Few-shot classification on frozen image embeddings: k labelled images per taxon, the rest to classify.

What it measures: how well an embedding space separates the benchmark's taxa when a handful of
labelled examples is all there is, the setting of BioCLIP's and BioBench's few-shot tables. No text
tower is involved, so any ``emb_*`` column can be evaluated, including those of image-only models.

Splits (:func:`few_shot_splits`). For each repetition and each taxon, the taxon's *groups* (the
``source_id`` of iNaturalist-style data, i.e. one observation's photos; or any column) are put in a
seeded random order, and so are the images inside each group; the first ``k`` images of that sequence
are the support set. Every group that lends a support image is then closed: its other images are
neither support nor query, so photos of one organism never straddle the two sides. The query set is
every image of the taxon in an untouched group. Consequences worth knowing:

- exactly ``k`` support images per taxon, and supports are nested across ``k`` within a repetition
  (the 5-shot support extends the 1-shot one), so a curve over ``k`` varies only ``k``;
- a draw is a function of (seed, repetition, taxon label, group values, uuids) only: independent of
  row order and of which other taxa or embedding columns exist, so every column of a dataset is
  scored on identical splits and adding a taxon leaves the others' splits unchanged;
- a taxon is evaluated only when *every* draw is guaranteed a query: the images outside its largest
  group, less ``max(shots) - 1``, must number at least ``min_test_per_class`` (with one image per group:
  at least ``max(shots) + 1`` groups). The rule uses the largest ``k`` for every ``k``, so all shot
  counts classify among the same taxa. Taxa that fail it are skipped and listed with their counts.

Methods (:data:`METHODS`, a registry):

- ``simpleshot``: SimpleShot (Wang et al. 2019, "SimpleShot: Revisiting Nearest-Neighbor
  Classification for Few-Shot Learning") as BioCLIP evaluates it (``src/evaluation/few_shot.py``, whose
  features are L2-normalised when extracted): L2-normalise every stored vector, subtract the mean of the
  normalised support vectors from support and query, L2-normalise again, take each taxon's mean support
  vector as its centroid, predict the nearest centroid by Euclidean distance.
- ``simpleshot-biobench``: the same without the first normalisation, as BioBench's
  ``SimpleShotClassifier`` runs on the features it is given: the raw stored vectors are centred on
  their support mean. The two agree on unit vectors and drift apart as the stored norms spread (raw
  embeddings, e.g. Fine-Grained Challenges'): a long support vector pulls the mean, and after
  centring a vector's direction depends on its length.
- ``linear``: multinomial logistic regression (scikit-learn, L-BFGS) on L2-normalised features, its
  inverse regularisation ``C`` chosen from a grid by stratified cross-validation on the support set
  only; with one shot no image per taxon can be held out, so a fixed ``C`` is used and recorded.
- ``knn``: cosine k-nearest neighbours over the support images (scikit-learn, brute force).

Metrics: per method and ``k``, accuracy on each repetition's queries, averaged over repetitions with
the sample standard deviation and a 95 % Student-t interval over repetitions (the repetitions are the
independent units; query images within one draw are not), and the same for balanced accuracy.

This package ``__init__`` presents the few-shot API on purpose (``from cladebench.tasks.fewshot import
FewShotConfig, few_shot``); the code lives in :mod:`~cladebench.tasks.fewshot.config`,
:mod:`~cladebench.tasks.fewshot.splits`, :mod:`~cladebench.tasks.fewshot.methods`,
:mod:`~cladebench.tasks.fewshot.task` and :mod:`~cladebench.tasks.fewshot.metrics`, which import each other
directly, never this ``__init__``; each name is imported from its module when first used
(:func:`cladebench.lazy.present_lazily`), so the config alone costs no pyarrow. The rows it reads come from
:mod:`cladebench.tasks.labelled_rows`.
"""

from typing import TYPE_CHECKING

from cladebench.lazy import present_lazily

if TYPE_CHECKING:  # what present_lazily presents, as the type checker sees it (nothing imported at run time)
    from cladebench.tasks.fewshot.config import MAX_REPETITIONS, FewShotConfig  # noqa: F401
    from cladebench.tasks.fewshot.methods import (  # noqa: F401
        METHODS,
        SIMPLESHOT_PROTOCOLS,
        FewShotMethod,
        MethodOutput,
        MethodSettings,
        choose_c,
        few_shot_method,
        knn,
        linear_probe,
        simpleshot,
        simpleshot_biobench,
    )
    from cladebench.tasks.fewshot.metrics import (  # noqa: F401
        PAIRED_OVER_QUERIES,
        T_INTERVAL,
        few_shot_metrics,
        few_shot_summary,
        metric_name,
        per_query_image_values,
    )
    from cladebench.tasks.fewshot.splits import FewShotSplit, SplitPlan, few_shot_splits  # noqa: F401
    from cladebench.tasks.fewshot.task import few_shot, plan_splits, predict_splits  # noqa: F401

__all__ = present_lazily(__name__, {
    "config": ("MAX_REPETITIONS", "FewShotConfig"),
    "methods": ("METHODS", "SIMPLESHOT_PROTOCOLS", "FewShotMethod", "MethodOutput", "MethodSettings", "choose_c",
                "few_shot_method", "knn", "linear_probe", "simpleshot", "simpleshot_biobench"),
    "metrics": ("PAIRED_OVER_QUERIES", "T_INTERVAL", "few_shot_metrics", "few_shot_summary", "metric_name",
                "per_query_image_values"),
    "splits": ("FewShotSplit", "SplitPlan", "few_shot_splits"),
    "task": ("few_shot", "plan_splits", "predict_splits"),
})
