"""The embedding map: every row with a vector in an ``emb_*`` column as a point of a 2-D projection, coloured by
its taxon at a chosen rank, by whether a run got it right, or by a group; hover shows the image, a click opens
it, and a box drawn on the map selects rows to browse, or to take away as a ``--where`` filter.

The projection is scikit-learn's PCA (two components, of the L2-normalised vectors, as every task uses them),
computed once per dataset version and column and kept on disk (``$CLADEBENCH_CACHE_DIR/serve-maps/<dataset>-v<n>/``,
one Parquet file of uuid, x, y per column, written whole): a server restarted on the same version draws at once,
and a new version gets a new map. The page draws the points on a canvas with ``map.js`` from this package (no
CDN, no library); the points come as JSON from ``/map/points``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from cladebench.cache import cache_dir
from cladebench.errors import CladebenchError, UsageError
from cladebench.paths import atomic_write_parquet
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.browse import display_name
from cladebench.serve.filters import group_columns_of
from cladebench.serve.pages import render
from cladebench.serve.runs_data import by_uuid, run_index, said, usable
from cladebench.serve.state import AppState, ServeState
from cladebench.serve.vectors import check_column, columns_of
from cladebench.store import sql_literal
from cladebench.taxonomy import RANK_COLUMNS

router = APIRouter()

LEGEND = 11
"""Categories coloured one by one (the commonest); the rest share one colour, "other"."""
BROWSE_LIMIT = 250
"""Most rows a selection opens in the grid (their uuids go in the address); a larger one is offered as a filter."""
NAME_COLUMNS = ("scientific_name", "species", "genus")


def _folder(state: ServeState) -> Path:
    if state.map_root is not None:
        path = state.map_root / state.key
        path.mkdir(parents=True, exist_ok=True)
        return path
    return cache_dir("serve-maps", state.key)


def map_path(state: ServeState, column: str) -> Path:
    """The cached projection of ``column`` at this dataset version (it may not exist yet)."""
    return _folder(state) / f"pca-{hashlib.sha256(column.encode()).hexdigest()[:16]}.parquet"


def project(vectors: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """The rows of ``vectors`` (normalised first) on their first two principal components, and the share of the
    variance each explains."""
    from sklearn.decomposition import PCA

    from cladebench.store.embeddings import normalise_rows

    if len(vectors) < 2:
        return np.zeros((len(vectors), 2), np.float32), [0.0, 0.0]
    pca = PCA(n_components=min(2, vectors.shape[1]), random_state=0)
    points = pca.fit_transform(normalise_rows(vectors)).astype(np.float32)
    if points.shape[1] < 2:
        points = np.hstack([points, np.zeros((len(points), 1), np.float32)])
    return points, [float(v) for v in pca.explained_variance_ratio_]


def projection(state: ServeState, column: str) -> pa.Table:
    """uuid, x, y of every row with a vector in ``column`` (read from the cache, else computed and cached)."""
    def make() -> pa.Table:
        import pyarrow.parquet as pq

        from cladebench.store.embeddings import valid_embeddings

        path = map_path(state, column)
        if path.exists():
            return pq.read_table(path)
        rows, vectors = valid_embeddings(state.dataset, column)
        points, explained = project(vectors)
        table = pa.table({"uuid": rows.column("uuid"), "x": points[:, 0], "y": points[:, 1]}).replace_schema_metadata(
            {"method": "scikit-learn PCA, 2 components, of L2-normalised vectors", "column": column,
             "dataset_version": str(state.version), "explained": ",".join(f"{v:.6f}" for v in explained)})
        atomic_write_parquet(path, table)
        return table

    return state.remembered(("map", column), make)


def _colour_choices(state: ServeState) -> list[tuple[str, str]]:
    """(value of ``color=``, label) of every way the map can be coloured."""
    choices = [(f"rank:{r}", f"taxon at {r}") for r in RANK_COLUMNS if r in state.columns]
    choices += [(f"run:{i}", f"run [{i}] right or wrong") for i in range(1, len(state.runs) + 1)
                if usable(state.runs[i - 1])]
    choices += [(f"group:{c}", c) for c in group_columns_of(state.dataset)]
    return choices


def _default_colour(state: ServeState) -> str:
    choices = [c for c, _ in _colour_choices(state)]
    for wanted in ("rank:family", "rank:order", *choices):
        if wanted in choices:
            return wanted
    return ""


def categories(state: ServeState, uuids: list[str], colour: str) -> list[str | None]:
    """The category of each of ``uuids`` under ``colour`` (None: the row has none)."""
    kind, _, name = colour.partition(":")
    if kind == "run":
        index = run_index(state, name)
        predicted = by_uuid(state, index)
        out: list[str | None] = []
        for uuid in uuids:
            row = predicted.get(uuid)
            if row is None:
                out.append("not predicted")
                continue
            right = said(state, index, row).right
            out.append("unscored" if right is None else "right" if right else "wrong")
        return out
    allowed = ({f"rank:{r}" for r in RANK_COLUMNS if r in state.columns}
               | {f"group:{c}" for c in group_columns_of(state.dataset)})
    if colour not in allowed:
        raise UsageError(f"color must be one of {', '.join(c for c, _ in _colour_choices(state))}, got {colour!r}")
    def read() -> dict[str, object]:
        table = state.dataset.to_table(columns=["uuid", name])
        return dict(zip(table.column("uuid").to_pylist(), table.column(name).to_pylist(), strict=True))

    values = state.remembered(("map values", name), read)
    return [None if values.get(u) is None else str(values.get(u)) for u in uuids]


def _names(state: ServeState) -> dict[str, str]:
    """uuid -> the name a point's hover shows."""
    def read() -> dict[str, str]:
        shown = [c for c in NAME_COLUMNS if c in state.columns]
        rows = state.dataset.to_table(columns=["uuid", *shown]).to_pylist()
        return {r["uuid"]: display_name(r) for r in rows}

    return state.remembered(("map names",), read)


@router.get("/map")
def map_page(request: Request, state: AppState) -> Response:
    """The map's page: the canvas, the column and the colouring to choose; the points come from ``/map/points``."""
    columns = columns_of(state)
    if not columns:
        return render(request, "map/page.html", columns=[], column=None, colour="", choices=[])
    column = check_column(state, request.query_params.get("column") or None)
    colour = request.query_params.get("color") or _default_colour(state)
    return render(request, "map/page.html", columns=columns, column=column, colour=colour,
                  choices=_colour_choices(state))


def _json_errors(handler: Callable[[Request, AppState], JSONResponse]) -> Callable[[Request, AppState], JSONResponse]:
    """``handler`` answering a user's mistake as ``{"error": line}`` with status 400 (the page's script shows the
    line), not as an HTML page."""
    import functools

    @functools.wraps(handler)
    def wrapped(request: Request, state: AppState) -> JSONResponse:
        try:
            return handler(request, state)
        except CladebenchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    return wrapped


@router.get("/map/points")
@_json_errors
def points(request: Request, state: AppState) -> JSONResponse:
    """Every point of a column's map: x, y, uuid, name and category (an index into ``legend``), as JSON."""
    column = check_column(state, request.query_params.get("column") or None)
    colour = request.query_params.get("color") or _default_colour(state)
    table = projection(state, column)
    uuids = table.column("uuid").to_pylist()
    found = categories(state, uuids, colour) if colour else [None] * len(uuids)
    common = [c for c, _ in Counter(c for c in found if c is not None).most_common(LEGEND)]
    index = {c: i for i, c in enumerate(common)}
    other, none = len(common), len(common) + 1
    codes = [none if c is None else index.get(c, other) for c in found]
    counts = Counter(codes)
    legend = [(c, counts[i]) for i, c in enumerate(common)]
    legend += [("other", counts[other]), ("(none)", counts[none])]
    names = _names(state)
    meta = table.schema.metadata or {}
    return JSONResponse({
        "column": column, "color": colour, "n": len(uuids),
        "x": [round(float(v), 5) for v in table.column("x").to_numpy()],
        "y": [round(float(v), 5) for v in table.column("y").to_numpy()],
        "uuid": uuids, "name": [names.get(u, "") for u in uuids], "category": codes,
        "legend": [[label, n] for label, n in legend],
        "method": meta.get(b"method", b"").decode(), "explained": meta.get(b"explained", b"").decode()})


def _box(text: str | None) -> tuple[float, float, float, float]:
    try:
        x0, y0, x1, y1 = (float(v) for v in (text or "").split(","))
    except ValueError:
        raise UsageError(f"box must be four numbers x0,y0,x1,y1, got {text!r}") from None
    if not all(np.isfinite([x0, y0, x1, y1])):
        raise UsageError(f"box must be four finite numbers, got {text!r}")
    return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)


@router.get("/map/select")
@_json_errors
def select(request: Request, state: AppState) -> JSONResponse:
    """The rows inside a box of the map (``box=x0,y0,x1,y1`` in the map's coordinates): how many, the ``--where``
    filter that selects them, and a link to browse them (up to :data:`BROWSE_LIMIT` rows)."""
    from urllib.parse import urlencode

    column = check_column(state, request.query_params.get("column") or None)
    x0, y0, x1, y1 = _box(request.query_params.get("box"))
    table = projection(state, column)
    x, y = table.column("x").to_numpy(), table.column("y").to_numpy()
    inside = np.flatnonzero((x >= x0) & (x <= x1) & (y >= y0) & (y <= y1))
    uuids = [table.column("uuid")[int(i)].as_py() for i in inside]
    where = f"uuid IN ({', '.join(sql_literal(u) for u in uuids)})" if uuids else None
    browse = "/?" + urlencode({"where": where}) if where and len(uuids) <= BROWSE_LIMIT else None
    return JSONResponse({"rows": len(uuids), "where": where, "browse": browse, "limit": BROWSE_LIMIT})


AREAS.add("map", Area(router=router, title="Map", path="/map", order=35))
