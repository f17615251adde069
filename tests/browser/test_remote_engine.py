"""The remote engine: a second `streamlit run app.py` generates through the first one's /v1 (LIFECYCLE_ENGINE_URL),
while its pages' insides (inspection pass) still run on its own copy of the weights."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.app_server import AppServer
from bench.sessions import visit
from tests.conftest import run_coroutine
from lifecycle.engine.remote import RemoteEngine, remote_engine
from lifecycle.errors import LifecycleError
from lifecycle.api.calllog import CallLog
from lifecycle.journey import JourneyInput, prepare, run_journey
from lifecycle.stages.sampling import SamplingSettings
from tests.browser.conftest import API_KEY_NAME

pytestmark = pytest.mark.browser

PROMPT = "What's the capital of India?"
GREEDY = SamplingSettings(temperature=0.0)


def test_remote_generation_gives_the_local_tokens_with_their_logprobs(app_url, api_key, loaded, monkeypatch):
    inp = JourneyInput(PROMPT, sampling=GREEDY, max_tokens=24)
    local = run_journey(inp, loaded)
    monkeypatch.setenv("LIFECYCLE_ENGINE_URL", f"{app_url}/v1")
    monkeypatch.setenv("LIFECYCLE_ENGINE_KEY", api_key)
    remote = run_journey(inp, loaded)
    # Greedy: the same model, the same tokens; the remote's logprobs list the content's tokens, not the
    # end-of-sequence token that ended the local generation.
    content = [step.token_id for step in local.generation.steps if not step.end_of_sequence]
    assert local.generation.steps[-1].end_of_sequence and remote.generation.token_ids == content
    assert remote.generation.text == local.generation.text and remote.generation.finish_reason == "stop"
    assert "remote engine" in next(t.detail for t in remote.timings if t.stage == "prefill")
    for mine, theirs in zip(local.generation.steps, remote.generation.steps):
        assert theirs.probability == pytest.approx(mine.base_probability, abs=2e-3)
        assert theirs.alternatives[0].id == mine.alternatives[0].id
    assert [d.token_id for d in remote.detokenized] == remote.generation.token_ids


@pytest.mark.slow  # starts a second `streamlit run app.py`, which loads its own model
def test_a_second_app_serves_its_pages_from_the_remote(app_url, api_key, shared, loaded):
    expected = run_journey(JourneyInput(PROMPT, sampling=GREEDY, max_tokens=24), loaded).generation
    log = CallLog(Path(shared.call_log))  # the first app's call log
    before = {record.id for record in log.recent(500)}
    env = {"LIFECYCLE_ENGINE_URL": f"{app_url}/v1", "LIFECYCLE_ENGINE_KEY": api_key}
    with AppServer(env) as second:
        page = run_coroutine(visit(second.url, "detokenization", {"prompt": PROMPT, "temperature": 0, "max_tokens": 24}))
    assert page.finished and not page.exceptions and not page.errors, page
    assert expected.text in page.texts  # the raw content the second app shows came from the remote
    # The same model on both sides: the page says the remote's first step matches the local prefill.
    # The page runs twice (its picture, then its details: ui.when_idle), and each run draws the notice afresh.
    notices = {text.replace("\\", "") for text in page.notices if "Remote engine" in text}
    assert len(notices) == 1 and "first step matches this app's model: the same top token (The)" in notices.pop(), notices
    assert page.runs == 2 and page.told_drawn == 1, page
    calls = [record for record in log.recent(500) if record.id not in before]
    assert len(calls) == 1, calls  # one generation, on the remote
    assert (calls[0].key_name, calls[0].outcome, calls[0].completion_tokens) == (
        API_KEY_NAME, "ok", expected.completion_tokens)


def test_a_wrong_key_or_an_unreachable_engine_is_a_clear_error(app_url, loaded):
    payload = prepare(JourneyInput(PROMPT, sampling=GREEDY, max_tokens=4), loaded.name, loaded.context_window).request.to_payload()
    with pytest.raises(LifecycleError, match="answered 401"):
        list(RemoteEngine(f"{app_url}/v1", "sk-wrong").generate_steps(loaded, payload))
    with pytest.raises(LifecycleError, match="failed: ConnectError"):
        list(RemoteEngine("http://127.0.0.1:9/v1").generate_steps(loaded, payload))


def test_the_engine_url_setting_is_checked():
    assert remote_engine({}) is None
    engine = remote_engine({"LIFECYCLE_ENGINE_URL": "http://gpu-box:8000/v1", "LIFECYCLE_ENGINE_MODEL": "smol"})
    assert engine == RemoteEngine("http://gpu-box:8000/v1", None, "smol")
    with pytest.raises(LifecycleError, match="LIFECYCLE_ENGINE_URL"):
        remote_engine({"LIFECYCLE_ENGINE_URL": "gpu-box:8000"})
    assert os.environ.get("LIFECYCLE_ENGINE_URL") is None  # the suite itself generates locally
