"""Compare embedding columns of one dataset: few-shot accuracy on identical splits, and linear CKA.

Two questions a benchmark of several models keeps asking: which embedding separates the taxa better
with little labelled data, and how similar are two embeddings' geometries over the same images. The
first is answered by few-shot accuracy per column on *the same* support/query draws (the splits
depend on the seed, labels, groups and uuids only, see :mod:`cladebench.tasks.fewshot`), so the
difference between columns is not split noise. The second by linear CKA (Kornblith, Norouzi, Lee and
Hinton 2019, "Similarity of Neural Network Representations Revisited"): invariant to rotations and
isotropic scaling of either embedding, so models of different widths and norms can be compared.

CKA is computed in its feature-space form, ``||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` on
column-centred matrices: the cost is O(n d^2) time and O(d^2) memory, so it runs over every shared row
of a large dataset where the n x n Gram matrices of the kernel form would not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cladebench import store
from cladebench.errors import CladebenchError
from cladebench.evaluate.checks import check_filter_on_schema
from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.tasks.common import column_metadata

if TYPE_CHECKING:
    import lance

    from cladebench.tasks.fewshot import FewShotConfig
    from cladebench.tasks.fewshot.splits import SplitPlan
    from cladebench.tasks.labelled_rows import LabelledRows


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA between two representations of the same rows (widths may differ); 1 means equal up to
    rotation and isotropic scaling.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(100, 8))
        >>> round(linear_cka(x, 3.0 * x), 6)
        1.0
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"need two matrices over the same rows, got shapes {x.shape} and {y.shape}")
    x = x - x.mean(axis=0, keepdims=True)
    y = y - y.mean(axis=0, keepdims=True)
    cross = np.linalg.norm(y.T @ x) ** 2
    scale = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    if scale == 0.0:
        raise ValueError("CKA is undefined for a representation that is constant over the rows")
    return float(cross / scale)


@dataclass(frozen=True)
class ColumnComparison:
    """Few-shot accuracy per embedding column on identical splits, and pairwise linear CKA."""

    columns: tuple[str, ...]
    """The compared columns, in the order given."""
    models: dict[str, object]
    """Model named by each column's metadata."""
    rows: int
    """Rows that have a vector in every column (and match the filter): CKA is computed over all of them."""
    accuracy: dict[str, dict[str, dict[str, Any]]]
    """Column -> metric name (``simpleshot_5shot``; ``GROUP/simpleshot_5shot`` per group of a grouped
    comparison) -> estimate (mean, t-interval over repetitions)."""
    cka: dict[str, dict[str, float]]
    """Symmetric matrix of linear CKA, column -> column -> value (1 on the diagonal)."""
    split: dict[str, Any]
    """Provenance of the shared splits (seed, shots, repetitions, sampling unit, skipped classes, fingerprint);
    of a grouped comparison, ``groups``: each group's own."""
    rank: str
    """Rank of the few-shot classes."""
    methods: dict[str, str] = field(default_factory=dict)
    """Few-shot method -> what it computes (``simpleshot`` is BioCLIP's protocol, ``simpleshot-biobench``
    BioBench's), as recorded in run records."""
    group_column: str | None = None
    """The partition column whose groups are separate few-shot problems (None: one pooled problem)."""
    groups: dict[str, int] = field(default_factory=dict)
    """Group -> rows with every column in it (empty when pooled)."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Group -> why it was not evaluated (too few images for the shots)."""

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["columns"] = list(self.columns)
        return out


def _few_shot(dataset: lance.LanceDataset, columns: list[str], config: FewShotConfig, where: str | None
              ) -> tuple[LabelledRows, SplitPlan | None, dict[str, dict[str, dict[str, Any]]]]:
    """One few-shot problem over the rows ``where`` selects: its rows, splits and accuracy per column."""
    from cladebench.tasks.fewshot import few_shot_summary, plan_splits, predict_splits
    from cladebench.tasks.labelled_rows import read_labelled_rows

    rows = read_labelled_rows(dataset, columns, rank=config.rank, where=where, group_key=config.group_key)
    if not rows.uuids:
        return rows, None, {}
    plan = plan_splits(rows, config)
    accuracy = {column: few_shot_summary(predict_splits(rows.vectors[column], plan, rows.uuids, config)[0],
                                         config.methods) for column in columns}
    return rows, plan, accuracy


def _split(rows: LabelledRows, plan: Any) -> dict[str, Any]:
    return {**plan.provenance(), "sampling_unit": rows.group_key, "rows_without_group": rows.rows_without_group,
            "rows_without_direction": rows.rows_without_direction}


def compare_columns(dataset: lance.LanceDataset, columns: Sequence[str] | None = None, *, rank: str = "species",
                    shots: Sequence[int] = (1, 5), repetitions: int = 5, seed: int = 0, where: str | None = None,
                    methods: Sequence[str] = ("simpleshot",), group_key: str = "auto",
                    min_test_per_class: int = 1, group_by: str = "auto") -> ColumnComparison:
    """Few-shot accuracy of each ``emb_*`` column (all of them by default) on the same splits, plus linear CKA.

    Only rows with a vector in every column are used, so each column sees exactly the same images. As in
    ``eval``, each group of the partition column (``group_by``: ``auto`` takes ``challenge_group`` where the
    dataset has it, ``none`` pools on purpose) is its own few-shot problem, never pooled with the others; CKA,
    a comparison of geometries rather than a classification, is computed over every shared row.
    """
    from cladebench.errors import NotEvaluableError
    from cladebench.evaluate.selection import and_filters, group_values, partition_column
    from cladebench.tasks.fewshot import METHODS, FewShotConfig
    from cladebench.tasks.labelled_rows import read_labelled_rows

    columns = list(columns) if columns is not None else store.embedding_columns(dataset.schema)
    if not columns:
        raise CladebenchError(f"{dataset.uri} has no embedding columns to compare")
    if len(set(columns)) != len(columns):
        raise CladebenchError(f"columns listed twice: {columns}")
    config = FewShotConfig(rank=rank, shots=tuple(shots), repetitions=repetitions, seed=seed,
                           methods=tuple(methods), where=where, group_key=group_key,
                           min_test_per_class=min_test_per_class)
    check_filter_on_schema(dataset, where)  # an unknown column or a type mismatch: exit 2, naming it
    if where is not None and where.strip() and not dataset.count_rows(filter=where):
        raise CladebenchError(f"the filter {where!r} matches no row of {dataset.uri}")
    rows = read_labelled_rows(dataset, columns, rank=rank, where=where, group_key=group_key)
    if not rows.uuids:
        scope = f" of the rows the filter {where!r} matches" if where is not None and where.strip() else ""
        raise CladebenchError(f"no row{scope} has a vector in every one of {columns}")
    group_column = partition_column(dataset, group_by)
    accuracy: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in columns}
    groups: dict[str, int] = {}
    left_out: dict[str, str] = {}
    if group_column is None:
        _, plan, accuracy = _few_shot(dataset, columns, config, where)
        split = _split(rows, plan)
    else:
        split = {"groups": {}}
        names, _, filters = group_values(dataset, group_column, where)
        for group in names:
            group_filter = filters[group]
            try:
                group_rows, plan, group_accuracy = _few_shot(dataset, columns, config,
                                                             and_filters(where, group_filter))
            except NotEvaluableError as error:
                left_out[group] = str(error)
                continue
            if plan is None:
                continue  # no row of the group has a vector in every column
            groups[group] = len(group_rows.uuids)
            split["groups"][group] = _split(group_rows, plan)
            for column in columns:
                accuracy[column].update({f"{group}{GROUP_SEPARATOR}{name}": estimate
                                         for name, estimate in group_accuracy[column].items()})
        if not groups:
            raise NotEvaluableError(f"no {group_column} group can be compared: "
                                    + "; ".join(f"{g!r}: {r}" for g, r in left_out.items()))
    cka: dict[str, dict[str, float]] = {c: {} for c in columns}
    for i, a in enumerate(columns):
        cka[a][a] = 1.0
        for b in columns[i + 1:]:
            cka[a][b] = cka[b][a] = linear_cka(rows.vectors[a], rows.vectors[b])
    return ColumnComparison(
        columns=tuple(columns),
        models={c: column_metadata(dataset, c).get("model") for c in columns},
        rows=len(rows.uuids), accuracy=accuracy, cka=cka, rank=config.rank,
        methods={m: METHODS[m].definition for m in config.methods}, split=split,
        group_column=group_column, groups=groups, left_out=left_out,
    )


CKA_CELL_WIDTH = 12
"""Characters of each cell of the printed CKA matrix; a column name longer than it is cut in the header (never two
names to the same string: :func:`cladebench.evaluate.labels.short_names`)."""

MODEL_CELL_WIDTH = 28
"""Characters of the printed model cell; the model is named by its label (a checkpoint by its folder's name)."""


def format_column_comparison(result: ColumnComparison) -> str:
    """The comparison as text: few-shot accuracy per column with its model, then the linear CKA matrix. Columns
    are named whole in the first column of each table; the CKA header cuts them to the cell width."""
    from cladebench.evaluate.labels import model_label, short_names

    columns = list(result.columns)
    width = max(len(c) for c in columns)
    models = {c: model_label(str(result.models[c])) if result.models.get(c) else "(no model named)" for c in columns}
    model_cells = short_names(list(models.values()), MODEL_CELL_WIDTH)
    headers = short_names(columns, CKA_CELL_WIDTH)
    sections: list[tuple[str, dict[str, Any], str]] = []  # (heading, splits, metric prefix)
    if result.group_column is None:
        sections.append((f"{result.rows:,} rows with every column", result.split, ""))
    else:
        for group, count in result.groups.items():
            sections.append((f"{result.group_column} = {group}: {count:,} rows with every column (its own few-shot "
                             "problem)", result.split["groups"][group], f"{group}{GROUP_SEPARATOR}"))
    lines = []
    for heading, split, prefix in sections:
        metrics = [m.removeprefix(prefix) for m in result.accuracy[columns[0]] if m.startswith(prefix)
                   and GROUP_SEPARATOR not in m.removeprefix(prefix)]
        lines.append(f"{heading}; splits {split.get('fingerprint', '')[:16]}… ({split.get('repetitions')} "
                     f"repetitions, seed {split.get('seed')})")
        lines.append(f"{'column':<{width}}  {'model':<{MODEL_CELL_WIDTH}} " + " ".join(f"{m:>24}" for m in metrics))
        for column in columns:
            cells = []
            for metric in metrics:
                estimate = result.accuracy[column][prefix + metric]
                low, high = estimate.get("low"), estimate.get("high")
                interval = f" [{100 * low:.1f}, {100 * high:.1f}]" if low is not None and high is not None else ""
                cells.append(f"{100 * estimate['value']:.1f}%{interval}".rjust(24))
            lines.append(f"{column:<{width}}  {model_cells[models[column]]:<{MODEL_CELL_WIDTH}} " + " ".join(cells))
    for group, reason in result.left_out.items():
        lines.append(f"{result.group_column} = {group}: left out, {reason}")
    lines.append("linear CKA" if result.group_column is None else f"linear CKA (over all {result.rows:,} rows)")
    lines.append(" " * (width + 2) + " ".join(f"{headers[c]:>{CKA_CELL_WIDTH}}" for c in columns))
    for a in columns:
        lines.append(f"{a:<{width}}  " + " ".join(f"{result.cka[a][b]:>{CKA_CELL_WIDTH}.3f}" for b in columns))
    return "\n".join(lines)
