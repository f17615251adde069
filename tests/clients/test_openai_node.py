"""The API through the official openai npm package (tests/clients/node, pinned by its package-lock.json),
run with the machine's node: tests/clients/node/checks.mjs makes the calls and prints what the client
returned; this test checks it.

`make install-dev` runs `npm ci` there. Without node, or without that install, the test fails and says
which: a missing client is missing work, not a reason to skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.expected import GreedyAnswer, greedy_answer, text_stream_kinds
from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY

NODE_DIR = Path(__file__).parent / "node"
PINNED = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["openai"]
SPAIN = "What is the capital of Spain?"  # the Responses calls' question (max_output_tokens 32, temperature 0)


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the openai-node checks need Node.js 20 or newer "
                    "(Debian: apt-get install nodejs npm), then `make install-dev`.")
    installed = NODE_DIR / "node_modules" / "openai" / "package.json"
    if not installed.exists():
        pytest.fail(f"the openai npm package is not installed in {NODE_DIR}: run `make install-dev` "
                    "(it runs `npm ci` there).")
    return node


@pytest.fixture(scope="module")
def node_run(base_url, api_server, loaded) -> dict:
    node = node_binary()
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env |= {"LIFECYCLE_BASE_URL": base_url, "LIFECYCLE_API_KEY": KEY, "LIFECYCLE_MODEL": loaded.name,
            "LIFECYCLE_CONTEXT_WINDOW": str(loaded.context_window), "LIFECYCLE_RESPONSES_INPUT": SPAIN}
    result = subprocess.run([node, "checks.mjs"], cwd=NODE_DIR, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stderr
    return json.loads(result.stdout)


def test_the_pinned_client_ran_on_node_20_or_newer(node_run):
    assert node_run["sdk"] == PINNED
    assert int(node_run["node"].lstrip("v").split(".")[0]) >= 20


def test_plain_answer(node_run, api_server, loaded):
    plain = node_run["plain"]
    assert plain["object"] == "chat.completion" and plain["model"] == loaded.name
    (choice,) = plain["choices"]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    usage = plain["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 < usage["completion_tokens"] <= 8
    row = api_server.gateway.log.get(node_run["plainRequestId"])
    assert row is not None and row.journey["completion_id"] == plain["id"]
    assert row.journey["request"]["headers"]["x-stainless-lang"] == "js"  # it was the node client


def test_stream_matches_the_plain_answer(node_run):
    plain, chunks = node_run["plain"], node_run["chunks"]
    text = plain["choices"][0]["message"]["content"]
    assert len({chunk["id"] for chunk in chunks}) == 1 and chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert sum(1 for piece in pieces if piece) > 1 and "".join(piece or "" for piece in pieces) == text
    finishing = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishing == [plain["choices"][0]["finish_reason"]]
    assert chunks[-1]["choices"] == []
    streamed, whole = chunks[-1]["usage"], plain["usage"]
    assert [streamed[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")] == \
        [whole[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")]


def test_the_stream_helper_assembles_the_same_completion(node_run):
    plain, final = node_run["plain"], node_run["finalCompletion"]
    text = plain["choices"][0]["message"]["content"]
    assert node_run["finalContent"] == text
    assert final["choices"][0]["message"]["content"] == text
    assert final["choices"][0]["finish_reason"] == plain["choices"][0]["finish_reason"]
    assert final["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


def test_logprobs_tokens_join_into_the_content(node_run):
    (choice,) = node_run["logprobs"]["choices"]
    content = choice["logprobs"]["content"]
    assert "".join(entry["token"] for entry in content) == choice["message"]["content"]
    assert len(content) == node_run["logprobs"]["usage"]["completion_tokens"]
    for entry in content:
        assert entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 3
        assert bytes(entry["bytes"]).decode("utf-8", "replace") == entry["token"]
        alternatives = [alt["logprob"] for alt in entry["top_logprobs"]]
        assert alternatives == sorted(alternatives, reverse=True)
        # Greedy: the chosen token is the likeliest (it is among the alternatives, ranked first).
        assert entry["top_logprobs"][0]["token"] == entry["token"]


def test_models_list_and_retrieve(node_run, loaded):
    assert node_run["models"] == [loaded.name]
    retrieved = node_run["retrieved"]
    assert (retrieved["id"], retrieved["object"]) == (loaded.name, "model")
    unknown = node_run["retrieveUnknown"]
    assert (unknown["class"], unknown["status"], unknown["code"]) == ("NotFoundError", 404, "model_not_found")


def test_wrong_key_is_the_clients_authentication_error(node_run):
    error = node_run["badKey"]
    assert (error["class"], error["status"], error["code"]) == ("AuthenticationError", 401, "invalid_api_key")
    assert error["requestID"].startswith("req_")


@pytest.mark.parametrize("case", ["tooLong", "tooLongStreamed"])
def test_too_long_prompt_is_a_bad_request_error_not_a_retried_429(node_run, api_server, case):
    error = node_run[case]
    assert (error["class"], error["status"]) == ("BadRequestError", 400)
    assert (error["code"], error["param"], error["type"]) == ("context_length_exceeded", "messages",
                                                              "invalid_request_error")
    assert error["retryAfter"] is None
    row = api_server.gateway.log.get(error["requestID"])
    assert row is not None and row.status == 400


def test_each_refused_call_reached_the_server_once(node_run, api_server):
    """maxRetries was 2 for both refusals: a 401 and a 400 are not retried."""
    assert api_server.gateway.refused["unauthorized"] == 1
    statuses = [row.status for row in api_server.gateway.log.recent(50)]
    assert statuses.count(400) == 2 and statuses.count(404) == 1


@pytest.fixture(scope="module")
def spain(loaded) -> GreedyAnswer:
    return greedy_answer(loaded, SPAIN, 32)


def test_responses_create_reports_the_tokenizers_counts(node_run, spain, loaded):
    assert spain.status == "completed", "the question must end before max_output_tokens"
    response = node_run["response"]
    assert response["id"].startswith("resp_") and response["model"] == loaded.name
    assert response["status"] == "completed" and response["output_text"] == spain.text
    usage = response["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (spain.prompt_tokens, spain.output_tokens)
    assert usage["input_tokens_details"]["cached_tokens"] <= spain.cache_serves_on_a_repeat


def test_responses_stream_true_sends_the_events_the_client_relies_on(node_run, spain):
    events = node_run["responseEvents"]
    kinds = [event["type"] for event in events]
    deltas = [event["delta"] for event in events if event["type"] == "response.output_text.delta"]
    assert kinds == text_stream_kinds(len(deltas), "response.completed") and len(deltas) > 1
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert len({event["response"]["id"] for event in events if "response" in event}) == 1
    assert "".join(deltas) == spain.text
    usage = events[-1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (spain.prompt_tokens, spain.output_tokens)
    # It repeated the plain call's prompt: the prefix cache served all of it but the last token.
    assert usage["input_tokens_details"]["cached_tokens"] == spain.cache_serves_on_a_repeat


def test_the_responses_stream_helper_assembles_the_final_response(node_run, spain):
    final = node_run["finalResponse"]
    assert final["status"] == "completed" and final["output_text"] == spain.text
    assert final["usage"]["output_tokens"] == spain.output_tokens
