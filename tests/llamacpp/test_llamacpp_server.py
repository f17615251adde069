"""The remote engine against llama.cpp's own OpenAI-compatible server (llama-server) on the GGUF the
model package ships: ``make remote-check`` builds the server and runs these (marker ``llamacpp``, left
out of ``make test`` by marker selection in pytest.ini).

Prints what it measured (template, gap) so docs/engine.md can quote it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lifecycle.engine.remote import RemoteEngine
from lifecycle.journey import JourneyInput, prepare
from lifecycle.model import gguf_path
from lifecycle.features.remote_gap import remote_first_step_gap
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.vocabulary import token_bytes

pytestmark = pytest.mark.llamacpp
SERVER = Path(os.environ.get("LLAMACPP_SERVER", ".venv-llamacpp/bin/llama-server"))
PROMPT = "What is the capital of France?"
GREEDY = SamplingSettings(temperature=0.0)  # as _payload asks: the two answers must be the same draw


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """llama-server on a free loopback port, serving the package's GGUF; yields its base URL (no /v1)."""
    assert SERVER.is_file(), f"{SERVER} is missing: run `make remote-check`, which builds it"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([str(SERVER), "-m", str(gguf_path()), "--host", "127.0.0.1", "--port", str(port),
                                "-c", "2048", "-t", "2", "--no-webui"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read().decode(errors="replace")[-2000:]
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError("llama-server did not answer /health within 120 s")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def _payload(loaded) -> dict:
    return {"model": loaded.name, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 24,
            "temperature": 0}


def test_it_renders_the_same_prompt_as_this_app(llama_server, loaded):
    prepared = prepare(JourneyInput(PROMPT), loaded.name, loaded.context_window)
    rendered = httpx.post(llama_server + "/apply-template", json={"messages": [{"role": "user", "content": PROMPT}]},
                          timeout=30).json()["prompt"]
    print(f"\nllama-server renders {rendered!r}\nthis app renders   {prepared.rendered.text!r}")
    assert rendered == prepared.rendered.text


def test_plain_completion_logprobs_join_into_the_content_and_usage_counts(llama_server, loaded):
    body = {**_payload(loaded), "logprobs": True, "top_logprobs": 5}
    reply = httpx.post(llama_server + "/v1/chat/completions", json=body, timeout=120).json()
    choice = reply["choices"][0]
    entries = choice["logprobs"]["content"]
    print(f"\nplain: {choice['message']['content']!r}, usage {reply['usage']}, first entry {entries[0]}")
    table = set(token_bytes(loaded).table)
    data = [bytes(e["bytes"]) if e.get("bytes") else e["token"].encode() for e in entries]
    assert all(d in table for d in data)
    assert b"".join(data).decode("utf-8") == choice["message"]["content"]
    assert all(len(e["top_logprobs"]) == 5 and e["logprob"] <= 0 for e in entries)
    prepared = prepare(JourneyInput(PROMPT), loaded.name, loaded.context_window)
    assert reply["usage"]["prompt_tokens"] == len(prepared.rendered.ids)
    assert reply["usage"]["completion_tokens"] in (len(entries), len(entries) + 1)  # +1: the EOS it counts


def test_the_remote_engine_streams_it_into_steps_and_measures_the_gap(llama_server, loaded):
    prepared = prepare(JourneyInput(PROMPT, sampling=GREEDY, max_tokens=24), loaded.name, loaded.context_window)
    timings: dict = {}
    engine = RemoteEngine(llama_server + "/v1", model=loaded.name)
    steps = list(engine.generate_steps(loaded, prepared.request.to_payload(), timings=timings))
    plain = httpx.post(llama_server + "/v1/chat/completions", json=_payload(loaded), timeout=120).json()
    assert "".join(step.delta for step in steps) == plain["choices"][0]["message"]["content"]
    assert all(step.token_id >= 0 for step in steps) and steps[-1].finished
    assert timings.get("prompt_tokens") == len(prepared.rendered.ids)
    from lifecycle.stages.forward_pass import run_forward
    from lifecycle.stages.sampling import next_token_distribution

    probs = next_token_distribution(run_forward(loaded, prepared.rendered.ids).last_logits, str).probs
    gap = remote_first_step_gap(steps[0].top_logprobs, probs, token_bytes(loaded).table,
                                local_prompt_tokens=len(prepared.rendered.ids),
                                remote_prompt_tokens=timings.get("prompt_tokens"))
    print(f"\nstreamed: {''.join(s.delta for s in steps)!r}\ngap: {gap.max_points:.2f} points, top matches "
          f"{gap.top_matches}\n{gap.sentence()}")
    assert gap.compared == len(steps[0].top_logprobs)
    assert ("matches this app's model" in gap.sentence()) == (not gap.beyond_rounding)
