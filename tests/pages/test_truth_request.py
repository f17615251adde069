"""Every number the Request page states, for two prompts, against an independent recomputation.

The page runs under AppTest at temperature 0. Its byte counts are checked against what the official
openai SDK really puts on the wire for the JSON bodies the page shows (the SDK's own httpx request,
caught by a mock transport before it leaves the process); its token counts against the tokenizer's
own ``apply_chat_template``; its answer's length and finish reason against transformers' own greedy
``generate`` on the loaded model; every count of messages and parameters by counting the JSON shown.
"""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest

from lifecycle.stages.request import EXTENSIONS
from tests.pages.harness import component_data, markdowns, run_page
from tests.pages.recompute import template_ids, transformers_greedy
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
MAX_TOKENS = 30


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def request_page(request, loaded):
    app = run_page("request", prompt=request.param, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    return app


def _lesson(app) -> str:
    return next(m for m in markdowns(app) if "Your settings became a JSON body" in m)


def _json_codes(app) -> list[dict]:
    """Every JSON object the page shows in a code block, the body (drawn by ui.live_code) first."""
    shown = []
    for text in (component_data(app, "request_body")["text"], *(code.value for code in app.code)):
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            shown.append(value)
    return shown


def _chat_body(app) -> dict:
    """The JSON body tab: the first JSON object on the page with messages (the page leads with it)."""
    return next(body for body in _json_codes(app) if "messages" in body)


def _responses_body(app) -> dict:
    return next(body for body in _json_codes(app) if "input" in body and "messages" not in body)


def _metric(app, label: str) -> str:
    return next(str(m.value) for m in app.metric if m.label == label)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _sdk_wire(call) -> bytes:
    """The body the official openai SDK sends for ``call(client)``, caught before it leaves the process."""
    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(400, json={"error": {"message": "caught by the test", "type": "invalid_request_error"}})

    client = openai.OpenAI(base_url="http://sdk.test/v1", api_key="sk-test", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(answer)))
    with pytest.raises(openai.BadRequestError):
        call(client)
    (body,) = sent
    return body


def _chat_wire(body: dict) -> bytes:
    standard = {k: v for k, v in body.items() if k not in EXTENSIONS}
    extra = {k: v for k, v in body.items() if k in EXTENSIONS}
    return _sdk_wire(lambda client: client.chat.completions.create(**standard, extra_body=extra or None))


def test_the_body_size_is_what_the_official_sdk_sends(request_page):
    app = request_page
    body = _chat_body(app)
    said = re.search(r"a JSON body of \*\*([\d,]+) bytes\*\* holding \*\*(\d+) messages?\*\* and (\d+) parameters?",
                     _lesson(app))
    assert said, _lesson(app)
    assert _number(said.group(1)) == len(_chat_wire(body))
    assert int(said.group(2)) == len(body["messages"])
    assert int(said.group(3)) == len([key for key in body if key not in ("model", "messages")])


def test_both_endpoints_sizes_are_what_the_sdk_sends(request_page):
    app = request_page
    sizes = re.search(r"takes ([\d,]+) bytes as a chat completion and ([\d,]+) bytes as a Responses call",
                      next(m for m in markdowns(app) if "as a Responses call" in m))
    assert sizes
    responses = _responses_body(app)
    assert _number(sizes.group(1)) == len(_chat_wire(_chat_body(app)))
    assert _number(sizes.group(2)) == len(_sdk_wire(lambda client: client.responses.create(**responses)))


def test_the_token_counts_are_the_templates_and_transformers_greedy_answer(request_page, loaded):
    app = request_page
    messages = _chat_body(app)["messages"]
    ids = list(reference_tokenizer(loaded).apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                               return_dict=True)["input_ids"])
    new, _ = transformers_greedy(loaded, ids, MAX_TOKENS)
    eos = {reference_tokenizer(loaded).convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    finish = "stop" if new[-1] in eos else "length"
    lesson = _lesson(app)
    assert f"**{len(ids):,} prompt tokens** (chat template included)" in lesson
    assert f"answered with **{len(new):,} tokens**, stopping with finish_reason **{finish}**" in lesson
    assert _number(_metric(app, "prompt_tokens")) == len(ids)
    assert _number(_metric(app, "completion_tokens")) == len(new)
    assert _number(_metric(app, "total_tokens")) == len(ids) + len(new)
    assert _metric(app, "finish_reason") == finish
    response = next(body for body in _json_codes(app) if body.get("object") == "chat.completion")
    answer = reference_tokenizer(loaded).decode(new, skip_special_tokens=True)
    assert response["choices"][0]["message"]["content"] == answer
    # The prompt as the Generation page's recomputation renders it: the same count, two ways.
    assert len(template_ids(loaded, messages[-1]["content"])) == len(ids)


def test_every_resent_turn_is_counted_through_the_template(request_page, loaded):
    app = request_page
    table = next(frame.value for frame in app.dataframe if "tokens sent again" in frame.value.columns)
    history: list[dict] = []
    answer = next(body for body in _json_codes(app) if body.get("object") == "chat.completion")
    turns = [(_chat_body(app)["messages"][-1]["content"], answer["choices"][0]["message"]["content"])]
    turns += [("Can you say that in simpler words?", ""), ("Give one everyday example.", "")]
    assert list(table["turn"]) == [1, 2, 3]
    previous_total = None
    for row, (user, assistant) in zip(table.itertuples(index=False), turns):
        messages = history + [{"role": "user", "content": user}]
        total = len(reference_tokenizer(loaded).apply_chat_template(messages, add_generation_prompt=True,
                                                                    tokenize=True, return_dict=True)["input_ids"])
        values = dict(zip(table.columns, row))
        assert values["messages sent"] == len(messages)
        assert values["prompt tokens"] == total
        assert values["tokens sent again"] == total - values["new message tokens"]
        if previous_total is not None:  # everything the last turn sent comes again, plus its answer
            assert values["tokens sent again"] > previous_total
        previous_total = total
        history = messages + [{"role": "assistant", "content": assistant}]
