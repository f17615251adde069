"""Warming a class: the warm endpoint fills the very caches the pages read, so a warmed prompt opens at once."""

import json
from collections import Counter

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from lifecycle.api.config import ApiConfig
from lifecycle.api.endpoints import ApiServer
from lifecycle.cli import main
from lifecycle.errors import LifecycleError
from lifecycle.api.warm import MAX_WARM_PROMPTS, WARM_PATH, parse_prompts, parse_settings, read_prompts
from tests.pages.harness import run_page

KEY = "sk-warm-test"
PROMPTS = ["Name a fruit.", "Name a river."]
SETTINGS = {"temperature": 0, "max_tokens": 3}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from lifecycle.api.warm_route import warm_routes
    from ui.settings import page_journey_input
    from ui.warm_pages import prepare_pages

    server = ApiServer(ApiConfig(keys={"teacher": KEY}, call_log=tmp_path_factory.mktemp("log") / "calls.sqlite3"))
    return TestClient(Starlette(routes=warm_routes(server, page_journey_input, prepare_pages)))  # as app.py does


def _warm(client, prompts, settings=SETTINGS, key=KEY, pages=True):
    reply = client.post(WARM_PATH, json={"prompts": prompts, "settings": settings, "pages": pages},
                        headers={"authorization": f"Bearer {key}"})
    return reply, [json.loads(line) for line in reply.text.splitlines() if line.strip()]


def test_warmed_prompts_open_on_the_pages_without_running_the_model_again(client, loaded):
    from lifecycle.results import shared_results

    reply, lines = _warm(client, PROMPTS, pages=False)  # the journey only: the next test warms the pages' own work
    assert reply.status_code == 200, reply.text
    assert sorted(line["index"] for line in lines[:-1]) == [0, 1]
    assert all(line["status"] == "ready" and line["completion_tokens"] <= 3 for line in lines[:-1])
    assert all(line["pages"] == [] for line in lines[:-1])
    assert lines[-1]["done"] is True and lines[-1]["ready"] == 2 and lines[-1]["failed"] == 0
    computations = dict(shared_results(loaded).cache.computations)
    for page in ("next-token", "generation", "streaming", ""):
        app = run_page(page, prompt=PROMPTS[0], temperature=0, max_tokens=3)
        assert not app.exception and not app.error
    after = shared_results(loaded).cache.computations
    for stage in ("prefill", "inspect", "answer"):
        assert after[stage] == computations[stage] >= 2, stage
    _, again = _warm(client, PROMPTS, pages=False)
    assert all(line["already_cached"] for line in again[:-1])


def test_warming_runs_the_work_of_the_pages_that_have_their_own(client, loaded):
    """The Agents page's loop and measurements, the KV cache page's turns, ... (each page's ``prepare``) run in the
    warm call: each such page then opens with nothing left to compute."""
    from lifecycle.results import shared_results
    from ui.warm_pages import page_preparers

    prompt = "Name a colour."
    before = Counter(shared_results(loaded).cache.computations)
    reply, lines = _warm(client, [prompt])
    assert reply.status_code == 200, reply.text
    pages = lines[0]["pages"]
    assert pages == list(page_preparers()) and {"agent", "kv-cache", "structured-output", "forward-pass"} <= set(pages)
    warmed_kinds = Counter(shared_results(loaded).cache.computations) - before
    for page in ("agent", "kv-cache", "structured-output"):
        assert any(f"views/{page.replace('-', '_')}.py" in kind for kind in warmed_kinds), (page, warmed_kinds)
    computations = Counter(shared_results(loaded).cache.computations)
    for page in pages:
        app = run_page(page, prompt=prompt, **SETTINGS)
        assert not app.exception and not app.error, page
    assert Counter(shared_results(loaded).cache.computations) - computations == Counter()


def test_a_wrong_key_is_refused_before_any_work(client):
    reply, _ = _warm(client, PROMPTS, key="sk-wrong")
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("body", "param"),
    [({"prompts": []}, "prompts"), ({"prompts": ["ok", 3]}, "prompts"),
     ({"prompts": ["ok"], "settings": {"temperature": "hot"}}, "temperature"),
     ({"prompts": ["ok"], "settings": {"colour": 1}}, "settings"), ({"prompts": ["ok"], "pages": "yes"}, "pages")],
)
def test_bad_warm_requests_get_a_clear_400(client, body, param):
    reply = client.post(WARM_PATH, json=body, headers={"authorization": f"Bearer {KEY}"})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param


def test_a_prompt_the_journey_refuses_is_reported_and_the_others_still_warm(client, loaded):
    _, lines = _warm(client, ["Name a fruit.", "x" * 30_000], pages=False)  # the journey only
    by_index = {line["index"]: line for line in lines[:-1]}
    assert by_index[0]["status"] == "ready" and by_index[0]["pages"] == []
    assert by_index[1]["status"] == "error" and "characters" in by_index[1]["error"]
    assert lines[-1]["failed"] == 1


def test_the_prompt_file_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "class.txt"
    path.write_text("# week 1\nWhy is the sky blue?\n\n  Name a fruit.  \nWhy is the sky blue?\n", encoding="utf-8")
    assert read_prompts(path) == ["Why is the sky blue?", "Name a fruit."]


def test_prompt_list_and_settings_are_checked():
    with pytest.raises(LifecycleError, match="At most"):
        parse_prompts(["p"] * (MAX_WARM_PROMPTS + 1))
    assert parse_settings({"temperature": 1, "seed": 7}) == {"temperature": 1.0, "seed": 7}
    with pytest.raises(LifecycleError, match="include_usage"):
        parse_settings({"include_usage": 1})


def test_the_command_fails_in_one_line_when_the_server_is_unreachable(tmp_path, capsys):
    path = tmp_path / "class.txt"
    path.write_text("Name a fruit.\n", encoding="utf-8")
    assert main(["warm", str(path), "--url", "http://127.0.0.1:9", "--api-key", KEY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot warm http://127.0.0.1:9/lifecycle/warm") and err.count("\n") == 1
