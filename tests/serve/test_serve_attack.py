"""Attacks on ``cladebench serve`` that once got through: a Host that only starts like a loopback address, a filter
that plans but fails when it runs (or ends in a comment), an unknown sort, a uuid with ``/`` and ``..`` in the
queue's thumbnails, runs over another dataset, the review area's suggestions as whole lineage strings, and an
option a docstring names that the command does not have."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import httpx
import pyarrow as pa
import pytest

from cladebench.errors import CladebenchError
from cladebench.serve.config import ServeConfig
from cladebench.serve.runs_data import by_uuid, short_name
from cladebench.serve.security import is_local

TRAVERSING_UUID = "../../etc/passwd"
"""A uuid that, pasted into a path unquoted, names another path of the server."""


def get(url: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(url.rstrip("/") + path, params=params, timeout=60)


def errors(page: httpx.Response) -> list[str]:
    return re.findall(r'class="error"[^>]*>(.*?)<', page.text, re.S)


def test_a_host_that_only_starts_like_a_loopback_address_is_refused(served) -> None:
    url, _ = served
    port = url.rsplit(":", 1)[1].strip("/")
    for host in (f"127.0.0.1.attacker.example:{port}", f"127.attacker.example:{port}", "127.0.0.1.nip.io"):
        refused = httpx.get(url, headers={"Host": host}, timeout=30)
        assert refused.status_code == 403, host
    assert httpx.get(url, headers={"Host": f"127.0.0.2:{port}"}, timeout=30).status_code == 200


def test_a_host_name_is_local_only_when_it_is_localhost() -> None:
    assert is_local("127.0.0.2") and is_local("127.1.2.3")
    assert not is_local("127.attacker.example") and not is_local("127.0.0.1.nip.io")


@pytest.mark.parametrize("path", ["/", "/runs", "/search"])
def test_a_where_that_fails_while_it_runs_is_one_line_of_text(served, path: str) -> None:
    url, _ = served
    extra = {"like": _first_uuid(served)} if path == "/search" else {}
    page = get(url, path, where="1/0 = 1", **extra)
    assert page.status_code == 200, page.text[:300]
    assert errors(page) and "1/0" in errors(page)[0]
    assert page.text.count('class="cell') == 0


def test_a_where_ending_in_a_comment_filters_as_written(served) -> None:
    url, started = served
    rows = started.state.dataset.count_rows()
    page = get(url, "/", where="uuid IS NOT NULL -- every row")
    assert page.status_code == 200 and not errors(page)
    assert f"{rows} rows" in page.text
    kept = get(url, "/", where="uuid IS NOT NULL --", challenge_group="mammals")  # the comment ends at its line
    assert kept.status_code == 200 and not errors(kept)
    assert f"{rows // 2} rows" in kept.text


def test_an_unknown_sort_is_a_usage_error_page(served) -> None:
    url, _ = served
    page = get(url, "/runs", sort="bogus<b>")
    assert page.status_code == 400
    assert "sort must be one of" in page.text and "bogus&lt;b&gt;" in page.text


def _first_uuid(served) -> str:
    _, started = served
    return started.state.dataset.to_table(columns=["uuid"], limit=1).column(0)[0].as_py()


def test_the_review_area_names_suggestions_as_the_rest_of_the_app_does(served) -> None:
    url, started = served
    uuid, row = next(iter(by_uuid(started.state, 1).items()))
    label = row["top5_labels"][0]
    name = short_name(started.state, 1, label)
    assert name != label  # a lineage label: the binomial is shown, the lineage on hover
    page = get(url, f"/review/{quote(uuid, safe='')}")
    assert f'data-name="{label}"' in page.text
    assert f'<span class="name" title="{label}">{name}</span>' in page.text
    queue = get(url, "/review").text
    assert '<td class="name" title="' in queue and ">" + label + "<" not in queue


def _tiny_dataset(root: Path) -> Path:
    from cladebench import store
    from cladebench.synthetic.world import make_world

    table = make_world().to_table(6, seed=5)
    uuids = table.column("uuid").to_pylist()
    uuids[0] = TRAVERSING_UUID
    table = table.set_column(table.schema.get_field_index("uuid"), "uuid", pa.array(uuids, pa.string()))
    path = root / "tiny.lance"
    store.write_dataset(table, path)
    return path


def test_the_queue_asks_for_a_thumbnail_by_the_whole_uuid(tmp_path: Path) -> None:
    from cladebench.serve.server import open_state, start

    config = ServeConfig(dataset=str(_tiny_dataset(tmp_path)), port=0)
    state = open_state(config)
    state.thumbnail_root = tmp_path / "thumbs"
    started = start(config, state)
    thread = started.run_in_thread()
    try:
        page = get(started.url, "/review")
        assert page.status_code == 200
        sources = re.findall(r'<img class="mini" src="([^"]+)"', page.text)
        assert f"/thumb/{quote(TRAVERSING_UUID, safe='')}" in sources
        assert all("/../" not in s for s in sources)
    finally:
        started.stop()
        thread.join(timeout=10)
        started.sock.close()


def test_runs_over_another_dataset_are_refused_before_the_server_starts(serve_data, tmp_path: Path) -> None:
    from cladebench.serve.server import open_state

    config = ServeConfig(dataset=str(_tiny_dataset(tmp_path)), runs=(serve_data.runs[0],), port=0)
    with pytest.raises(CladebenchError, match=r"none of its \d+ predicted rows is in"):
        open_state(config)


def test_every_serve_option_a_docstring_names_exists() -> None:
    import cladebench.serve

    fields = {f.replace("_", "-") for f in ServeConfig.__dataclass_fields__}
    folder = Path(cladebench.serve.__file__).parent
    named = {m for path in folder.glob("*.py") for m in re.findall(r"serve --([a-z][a-z-]*)", path.read_text())}
    assert named <= fields, f"options named but not in ServeConfig: {sorted(named - fields)}"
