"""The review area over HTTP, served for real on 127.0.0.1: the queue's order, taxon completion, a review saved only
after it committed, the reviewer from the token and never from the form, two reviewers at the same moment, a
disagreement listed, a killed server that lost nothing, and hostile strings shown as text."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import quote, unquote

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from cladebench.serve.review_queue import queue
from cladebench.store.reviews import read_reviews, review_summary, reviews_path
from cladebench.taxonomy.complete import default_backbone
from helpers.review_data import HOSTILE_GENUS, HOSTILE_NOTE, serving_process
from helpers.serve_data import running


@pytest.fixture
def fresh(review_data: object, tmp_path: Path) -> object:
    """The module's dataset with no reviews yet (each test starts from none)."""
    reviews = reviews_path(str(review_data.dataset))
    if reviews.exists():
        shutil.rmtree(reviews)  # made by the previous test
    return review_data


def _csrf(client: httpx.Client, url: str) -> str:
    page = client.get(url + "review")
    return re.search(r'<meta name="csrf" content="([^"]+)"', page.text).group(1)


def _taxon(client: httpx.Client, url: str, text: str) -> dict:
    found = client.get(url + "review/taxa", params={"q": text}).json()
    assert found, f"no taxon completes {text!r}"
    return found[0]


def _save(client: httpx.Client, url: str, csrf: str, uuid: str, body: dict) -> httpx.Response:
    return client.post(url + "review/" + quote(uuid, safe=""), content=json.dumps(body),
                       headers={"X-Cladebench-CSRF": csrf, "Content-Type": "application/json"})


def test_the_queue_puts_genus_only_rows_first_least_certain_first(fresh) -> None:
    with running(fresh) as (url, started), httpx.Client(timeout=60) as client:
        page = client.get(url + "review")
        assert page.status_code == 200
        listed = [unquote(u) for u in re.findall(r'<td class="uuid"><a href="/review/([^"]+)">', page.text)]
        genus_only = set(fresh.genus_only)
        assert set(listed[:len(genus_only)]) == genus_only and not genus_only & set(listed[len(genus_only):])
        rows = queue(started.state)
        shown = [r.confidence for r in rows[:len(genus_only)]]
        assert None not in shown and shown == sorted(shown)  # the run's top-1 probability, lowest first
        assert 'id="start"' in page.text


def test_taxa_complete_at_any_rank_and_not_identifiable(fresh) -> None:
    with running(fresh) as (url, _), httpx.Client(timeout=60) as client:
        genus = next(g for g in client.get(url + "review/taxa", params={"q": "a"}).json() if g["rank"] == "kingdom")
        assert genus["lineage"][0] == genus["name"]
        found = client.get(url + "review/taxa", params={"q": "not"}).json()
        assert found[0] == {"name": "not identifiable", "rank": None, "lineage": None, "source": "verdict"}
        hostile = client.get(url + "review/taxa", params={"q": "<script>"}).json()
        assert hostile and hostile[0]["name"] == HOSTILE_GENUS  # JSON, shown by the page as text


def test_a_review_is_saved_and_the_next_row_named(fresh) -> None:
    first, second = fresh.genus_only[1], fresh.genus_only[2]
    with running(fresh) as (url, started), httpx.Client(timeout=60) as client:
        csrf = _csrf(client, url)
        species = next(m for m in client.get(url + "review/taxa", params={"q": started.state.dataset.to_table(
            columns=["species"], filter="species IS NOT NULL", limit=1).column(0)[0].as_py()}).json()
            if m["rank"] == "species")
        answer = _save(client, url, csrf, first, {**species, "note": HOSTILE_NOTE, "confidence": "high",
                                                  "reviewer": "mallory"})
        assert answer.status_code == 200 and answer.json()["saved"], answer.text
        assert answer.json()["next"].startswith("/review/")
        rows = read_reviews(reviews_path(str(fresh.dataset))).to_pylist()  # committed before the answer came
        assert len(rows) == 1 and rows[0]["uuid"] == first and rows[0]["species"] == species["name"]
        assert rows[0]["reviewer"] != "mallory"  # the form's name is never used
        assert rows[0]["note"] == HOSTILE_NOTE and rows[0]["confidence"] == "high"
        assert rows[0]["run"] and rows[0]["model"] and rows[0]["suggestions"]
        assert rows[0]["dataset_version"] == started.state.version
        assert _save(client, url, csrf, second, {"not_identifiable": True}).json()["saved"]
        if default_backbone() is not None:  # a taxon the dataset lacks, from the iNat taxonomy, at genus
            felis = next(m for m in client.get(url + "review/taxa", params={"q": "Felis"}).json()
                         if m["name"] == "Felis" and m["rank"] == "genus")
            assert felis["source"] == "taxonomy" and felis["lineage"][4] == "Felidae"
            assert _save(client, url, csrf, second, felis).json()["saved"]
        page = client.get(url + "review/" + quote(first, safe=""))
        assert HOSTILE_NOTE not in page.text and "&lt;img src=x onerror=" in page.text  # escaped
        # refused, nothing written: a lineage that is no known taxon, a bad confidence, an unknown row, no CSRF
        made_up = {**species, "lineage": [*species["lineage"][:5], "Nogenus", "Nogenus fake"], "name": "Nogenus fake"}
        assert _save(client, url, csrf, first, made_up).status_code == 400
        assert "confidence" in _save(client, url, csrf, first, {**species, "confidence": "total"}).json()["error"]
        assert _save(client, url, csrf, "no-such-row", species).status_code == 400
        assert client.post(url + "review/" + quote(first, safe=""), content=json.dumps(species)).status_code == 403
        assert len(read_reviews(reviews_path(str(fresh.dataset)))) == (3 if default_backbone() else 2)


def test_two_reviewers_at_the_same_moment_both_land_under_their_token_names(fresh, tmp_path) -> None:
    tokens = {"ana": "a" * 24, "ben": "b" * 24}
    token_file = tmp_path / "tokens"
    token_file.write_text("".join(f"{owner} {token}\n" for owner, token in tokens.items()))
    rows = fresh.genus_only[:3]
    with running(fresh, token_file=token_file) as (url, _):
        clients = {owner: httpx.Client(timeout=60, headers={"X-Cladebench-Token": token})
                   for owner, token in tokens.items()}
        csrf = _csrf(clients["ana"], url)
        kingdom = next(m for m in clients["ana"].get(url + "review/taxa", params={"q": "a"}).json()
                       if m["rank"] == "kingdom")
        not_identifiable = {"not_identifiable": True}
        barrier = threading.Barrier(6)
        answers: list[int] = []

        def review(owner: str, uuid: str) -> None:
            body = not_identifiable if (owner == "ben" and uuid == rows[0]) else kingdom
            barrier.wait()
            answers.append(_save(clients[owner], url, csrf, uuid, {**body, "reviewer": "mallory"}).status_code)

        threads = [threading.Thread(target=review, args=(o, u)) for o in tokens for u in rows]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [200] * 6
        summary = review_summary(read_reviews(reviews_path(str(fresh.dataset))))
        assert summary.reviews == 6 and {r for by in summary.current.values() for r in by} == {"ana", "ben"}
        assert set(summary.disagreements) == {rows[0]} and set(summary.agreed) == set(rows[1:])
        page = clients["ana"].get(url + "review")
        assert 'id="disputed"' in page.text and "not identifiable" in page.text
        for client in clients.values():
            client.close()


def test_a_killed_server_lost_no_acknowledged_review(fresh, tmp_path) -> None:
    uuid = fresh.genus_only[3]
    with serving_process(fresh, tmp_path / "cache") as (url, process), httpx.Client(timeout=60) as client:
        csrf = _csrf(client, url)
        answer = _save(client, url, csrf, uuid, {"not_identifiable": True, "note": "kill me"})
        assert answer.json()["saved"]
        process.kill()  # SIGKILL: no shutdown, no flush
        process.wait(timeout=30)
    rows = read_reviews(reviews_path(str(fresh.dataset))).to_pylist()
    assert [(r["uuid"], r["note"]) for r in rows] == [(uuid, "kill me")]
    with serving_process(fresh, tmp_path / "cache") as (url, _), httpx.Client(timeout=60) as client:
        page = client.get(url + "review/" + quote(uuid, safe=""))
        assert "kill me" in page.text and "not identifiable" in page.text


def test_each_suggestion_is_marked_inside_or_outside_the_rows_labelled_genus(fresh) -> None:
    from cladebench.serve.review_queue import genus_of, suggestions

    with running(fresh) as (url, started), httpx.Client(timeout=60) as client:
        state = started.state
        marks = {"in": 0, "out": 0}
        for uuid in fresh.genus_only[1:]:
            genus = state.dataset.to_table(columns=["genus"], filter=f"uuid = '{uuid}'").column(0)[0].as_py()
            page = client.get(url + "review/" + quote(uuid, safe="")).text
            items = re.findall(r'<li><button type="button" class="suggestion".*?</li>', page, re.S)
            said = suggestions(state, uuid)[0]
            assert len(items) == len(said.top5_names) > 0
            for item, name in zip(items, said.top5_names, strict=True):
                expected = "in" if genus_of(state, name) == genus else "out"
                assert f'data-genus="{expected}"' in item, (name, genus)
                marks[expected] += 1
            assert f"the labelled genus <i>{genus}</i>" in page
        assert marks["in"] and marks["out"]  # both kinds are met on these rows
        listed = client.get(url + "review").text  # the queue marks each genus-only row's top suggestion too
        for row in queue(state):
            cells = re.search(rf'{re.escape(quote(row.uuid, safe=""))}">{re.escape(row.uuid)}</a>.*?</tr>', listed,
                              re.S)
            if row.genus_only and row.suggestion_name:
                expected = "in" if genus_of(state, row.suggestion_name) == row.genus else "out"
                assert f'data-genus="{expected}"' in cells.group(0), row
            else:
                assert "data-genus" not in cells.group(0), row


def test_blind_mode_hides_label_suggestions_and_reviews_until_answered(fresh) -> None:
    uuid = fresh.genus_only[1]
    with running(fresh) as (url, started), httpx.Client(timeout=60) as client:
        genus = started.state.dataset.to_table(columns=["genus"], filter=f"uuid = '{uuid}'").column(0)[0].as_py()
        queue_page = client.get(url + "review", params={"blind": "1"}).text
        assert "dataset says" not in queue_page and "top suggestion" not in queue_page
        assert re.search(r'id="start" href="/review/[^"]+\?blind=1"', queue_page)
        hidden = client.get(url + "review/" + quote(uuid, safe=""), params={"blind": "1"}).text
        assert 'id="blind-note"' in hidden and "data-hidden" in hidden
        assert genus not in hidden and 'class="suggestion"' not in hidden and 'id="reviews"' not in hidden
        answer = _save(client, url, _csrf(client, url), uuid, {"not_identifiable": True, "blind": True})
        assert answer.json()["saved"]
        row = read_reviews(reviews_path(str(fresh.dataset))).to_pylist()[0]
        assert row["suggestions"] == [] and row["run"] is None and row["model"] is None  # nothing was shown
        shown = client.get(url + "review/" + quote(uuid, safe=""), params={"blind": "1"}).text
        assert genus in shown and 'class="suggestion"' in shown and 'id="next-unreviewed"' in shown
        assert "data-hidden" not in shown and "blind=1" in re.search(r'id="next-unreviewed" href="([^"]+)"',
                                                                    shown).group(1)


def test_agreement_is_stated_per_row_and_over_the_queue(fresh, tmp_path) -> None:
    tokens = {"ana": "a" * 24, "ben": "b" * 24}
    token_file = tmp_path / "tokens"
    token_file.write_text("".join(f"{owner} {token}\n" for owner, token in tokens.items()))
    rows = fresh.genus_only[1:4]
    with running(fresh, token_file=token_file) as (url, _):
        clients = {o: httpx.Client(timeout=60, headers={"X-Cladebench-Token": t}) for o, t in tokens.items()}
        csrf = _csrf(clients["ana"], url)
        kingdom = next(m for m in clients["ana"].get(url + "review/taxa", params={"q": "a"}).json()
                       if m["rank"] == "kingdom")
        for owner in tokens:
            for uuid in rows:
                body = {"not_identifiable": True} if owner == "ben" and uuid == rows[0] else kingdom
                assert _save(clients[owner], url, csrf, uuid, body).json()["saved"]
        queue_page = clients["ana"].get(url + "review").text
        agreement = re.sub(r"<[^>]+>|\s+", " ", re.search(r'<p id="agreement">(.*?)</p>', queue_page, re.S).group(1))
        assert "2 of 3 rows reviewed by two or more people" in agreement and "percent agreement 66.7%" in agreement
        assert "Cohen's kappa" in agreement and "ana–ben" in agreement and "(n=3, 2 agree)" in agreement
        assert queue_page.count("(2 reviewers)") == 3
        disputed = clients["ben"].get(url + "review/" + quote(rows[0], safe="")).text
        agreed = clients["ben"].get(url + "review/" + quote(rows[1], safe="")).text
        assert 'id="row-agreement">the reviewers disagree' in disputed
        assert 'id="row-agreement">the reviewers agree' in agreed
        for client in clients.values():
            client.close()
