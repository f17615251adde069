"""The remote engine against a recorded llama.cpp-shaped stream (llama-cpp-python's OpenAI-compatible
server: ``"bytes": null`` in every logprobs entry, no usage chunk), served over real HTTP.

llama.cpp cannot be built in CI (it compiles for minutes), so the frames are the shape its server sends,
replayed by a small HTTP server; the tokens are the real local tokenizer's.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lifecycle.engine.remote import RemoteEngine
from lifecycle.errors import LifecycleError
from lifecycle.stages.forward_pass import run_forward
from lifecycle.stages.sampling import next_token_distribution

ANSWER = "The capital of France is Paris."
PAYLOAD = {"model": "smollm2", "messages": [{"role": "user", "content": "What is the capital of France?"}],
           "max_tokens": 16, "temperature": 0}


def _entry(token: str, logprob: float, runner_up: str) -> dict:
    return {"token": token, "logprob": logprob, "bytes": None,
            "top_logprobs": [{"token": token, "logprob": logprob, "bytes": None},
                             {"token": runner_up, "logprob": logprob - 2.5, "bytes": None}]}


def llama_cpp_frames(tokens: list[str]) -> list[dict]:
    """A chat stream as llama-cpp-python's server sends it: a role chunk, one chunk per token with
    its logprobs (bytes null), a finish chunk, and no usage chunk."""
    head = {"id": "chatcmpl-0b6f", "object": "chat.completion.chunk", "created": 1764690000, "model": "smollm2"}
    frames = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": None, "finish_reason": None}]}]
    for position, token in enumerate(tokens):
        frames.append({**head, "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None,
                                            "logprobs": {"content": [_entry(token, -0.1 * (position + 1), " the")],
                                                         "refusal": None}}]})
    frames.append({**head, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]})
    return frames


@contextmanager
def replaying(frames: list[dict]) -> Iterator[tuple[str, list[dict]]]:
    """An HTTP server whose /v1/chat/completions streams ``frames``; yields its base URL and the bodies it got."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for frame in frames:
                self.wfile.write(f"data: {json.dumps(frame)}\r\n\r\n".encode())
            self.wfile.write(b"data: [DONE]\r\n\r\n")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", received
    finally:
        server.shutdown()
        server.server_close()


def local_tokens(loaded, text: str) -> tuple[list[int], list[str]]:
    ids = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids, [loaded.tokenizer.decode([i]) for i in ids]


def test_bytes_null_tokens_are_identified_by_their_text(loaded):
    ids, tokens = local_tokens(loaded, ANSWER)
    with replaying(llama_cpp_frames(tokens)) as (url, received):
        timings: dict = {}
        steps = list(RemoteEngine(url).generate_steps(loaded, PAYLOAD, timings=timings))
    assert received[0]["logprobs"] is True and received[0]["stream"] is True
    assert [step.token_id for step in steps] == ids
    assert "".join(step.delta for step in steps) == ANSWER
    assert [bytes(step.token_bytes).decode("utf-8") for step in steps] == tokens
    assert [step.finished for step in steps] == [None] * (len(ids) - 1) + ["stop"]
    assert [step.logprob for step in steps] == pytest.approx([-0.1 * (i + 1) for i in range(len(ids))])
    the = loaded.tokenizer(" the", add_special_tokens=False)["input_ids"]
    assert len(the) == 1 and all(step.top_logprobs[1].token_id == the[0] for step in steps)
    assert timings["waited_seconds"] == 0.0 and timings["prefill_seconds"] >= 0


@pytest.mark.parametrize("text", ["", "\ufffd"])
def test_a_bytes_null_token_whose_text_cannot_name_its_bytes_is_refused(loaded, text):
    """llama.cpp's server decodes a piece of a character away (empty text or U+FFFD): refused, not guessed."""
    _, tokens = local_tokens(loaded, "Paris")
    with replaying(llama_cpp_frames(tokens + [text])) as (url, _):
        with pytest.raises(LifecycleError, match='"bytes": null'):
            list(RemoteEngine(url).generate_steps(loaded, PAYLOAD))


def test_the_answer_names_its_remote_and_its_first_step_is_measured_against_the_local_prefill(loaded, monkeypatch):
    """A llama.cpp-shaped stream whose logprobs are not the local model's: the answer records the remote
    and its prompt count, and the gap against the local prefill is |remote - local| in points."""
    from lifecycle.journey import JourneyInput, answer, prepare
    from lifecycle.features.remote_gap import remote_first_step_gap
    from lifecycle.stages.vocabulary import token_bytes

    ids, tokens = local_tokens(loaded, ANSWER)
    prepared = prepare(JourneyInput("What is the capital of France?", max_tokens=16), loaded.name, loaded.context_window)
    frames = llama_cpp_frames(tokens)
    frames.append({"id": "chatcmpl-0b6f", "object": "chat.completion.chunk", "created": 1764690000, "choices": [],
                   "usage": {"prompt_tokens": len(prepared.rendered.ids) + 4, "completion_tokens": len(ids)}})
    with replaying(frames) as (url, _):
        monkeypatch.setenv("LIFECYCLE_ENGINE_URL", url)
        got = answer(prepared, loaded)
    assert got.remote == url and got.remote_prompt_tokens == len(prepared.rendered.ids) + 4
    probs = next_token_distribution(run_forward(loaded, prepared.rendered.ids).last_logits, str).probs
    gap = remote_first_step_gap(got.generation.steps[0].top_logprobs, probs, token_bytes(loaded).table,
                                local_prompt_tokens=len(prepared.rendered.ids),
                                remote_prompt_tokens=got.remote_prompt_tokens)
    the = loaded.tokenizer(" the", add_special_tokens=False)["input_ids"][0]
    expected = max(abs(math.exp(-0.1) - probs[ids[0]]), abs(math.exp(-2.6) - probs[the])) * 100
    assert gap.max_points == pytest.approx(expected, abs=1e-6) and gap.beyond_rounding
    assert gap.local_top == token_bytes(loaded).table[int(np.argmax(probs))]
    assert "renders another prompt" in gap.sentence()
