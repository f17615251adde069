"""Every sentence true: the pages' stated numbers against an independent recomputation.

For two prompts and a 1,000-token one the pages run under AppTest and what they state is checked against numbers this
file computes itself: the chat template with the tokenizer's own ``apply_chat_template``, the
next-token distribution with a plain transformers forward pass of the loaded model (not the
engine the pages use), the KV cache and the weights a decode step reads from the model's config,
the PCA share with numpy on the embedding rows, and shares and sums by arithmetic on the pages'
own tables. Pages must also agree with each other (prompt tokens, top token, TTFT, event counts).
"""

from __future__ import annotations

import math
import re
import threading
import time

import numpy as np
import pytest

from lifecycle.features.call_timeline import LAST_FRAMES, WAIT
from lifecycle.engine import shared_engine
from lifecycle.api.serving import LOADER_THREAD, model_status, start_model_loading
from tests.engine_idle import until_idle
from tests.pages.harness import markdowns, plotly_figure, run_page
from tests.pages.recompute import LONG_PROMPT, kv_bytes_per_token, next_token_probs, template_ids

LONG = LONG_PROMPT  # a long prompt too: 1,007 tokens with the template
PROMPTS = ["What's the capital of India?", "Why is the sky blue?", LONG]
# Plain fractions a page may read a share as, and the share each means.
FRACTION_WORDS = {
    "a tenth": 1 / 10, "a fifth": 1 / 5, "a quarter": 1 / 4, "a third": 1 / 3, "two fifths": 2 / 5, "half": 1 / 2,
    "three fifths": 3 / 5, "two thirds": 2 / 3, "three quarters": 3 / 4, "four fifths": 4 / 5, "nine tenths": 9 / 10,
}
# GGUF's blocks of 32 weights: Q4_1 stores 16 bytes of codes and two fp32 numbers (scale, offset);
# Q8_0 32 bytes of codes and one fp32 scale. The engine keeps keys and values in fp32.
Q4_1_BYTES, Q8_0_BYTES, BLOCK, FP32 = 16 + 8, 32 + 4, 32, 4


def _figure(text: str) -> float:
    """A number as a page writes it ("1,234.5"), as a float."""
    return float(text.replace(",", ""))


def _ms(text: str, unit: str) -> float:
    return _figure(text) * (1000 if unit == "s" else 1)


def _all_text(app) -> str:
    return " | ".join([m for m in markdowns(app)] + [c.value for c in app.caption])


def _wait_until_engine_idle(loaded, seconds: float = 120) -> None:
    """The app's start-up work (priming the chat template) is done and nothing of an earlier test still
    runs in the engine, so the journey is alone in it."""
    deadline = time.monotonic() + seconds
    start_model_loading()  # what app.py does on its first run
    while model_status().state != "ready" and time.monotonic() < deadline:
        time.sleep(0.2)
    # "ready" comes before the loader queues the chat template's priming: an engine idle in between is not idle.
    for thread in threading.enumerate():
        if thread.name == LOADER_THREAD:
            thread.join(max(0.0, deadline - time.monotonic()))
    until_idle(shared_engine(loaded), max(0.0, deadline - time.monotonic()))




def _weights_read_per_step(config, packed_shapes: set[tuple[int, int]]) -> int:
    """Bytes of every matrix a decode step multiplies by, from the config alone: the GGUF's codes for
    the matrices whose shape runs the packed kernel (``_packed_shapes``), fp32 for the others."""
    hidden, inner = config.hidden_size, config.intermediate_size
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    layer_shapes = [((heads + 2 * kv_heads) * head_dim, hidden), (hidden, heads * head_dim), (2 * inner, hidden),
                    (hidden, inner)]
    total = 0
    for rows, columns in layer_shapes:
        weights = config.num_hidden_layers * rows * columns
        total += weights // BLOCK * Q4_1_BYTES if (rows, columns) in packed_shapes else weights * FP32
    head = config.vocab_size * hidden
    return total + (head // BLOCK * Q8_0_BYTES if (config.vocab_size, hidden) in packed_shapes else head * FP32)


def _packed_shapes(loaded) -> set[tuple[int, int]]:
    """The shapes of the matrices whose one-token kernel, measured fastest at start, reads packed codes."""
    choice = shared_engine(loaded).stack.choice
    return {s.shape for s in choice.shapes if s.chosen == "gemv.c packed"} if choice is not None else set()


def _check_share_words(sentence: str, share: float) -> None:
    """"about X" within 3 points of X, "more than X" above it, "less than X" below it."""
    found = re.search(r"(?i)\b(about|more than|less than) (" + "|".join(FRACTION_WORDS) + r")\b", sentence)
    if found is None:
        assert "half" not in sentence.lower(), sentence
        return
    how, words = found.group(1).lower(), found.group(2)
    value = FRACTION_WORDS[words]
    if how == "about":
        assert abs(share - value) <= 0.03, (sentence, share)
    elif how == "more than":
        assert share > value, (sentence, share)
    else:
        assert share < value, (sentence, share)


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky", "long"])
def pages(request, loaded):
    """The pages for one prompt, the journey map first (alone in the engine), then the others."""
    _wait_until_engine_idle(loaded)
    prompt = request.param
    opened = {"": run_page("", prompt=prompt, temperature=0)}
    for page in ("streaming", "next-token", "kv-cache", "embeddings", "context-window"):
        opened[page] = run_page(page, prompt=prompt, temperature=0)
    for page, app in opened.items():
        assert not app.exception and not app.error, page
    return prompt, opened


def _frames(app):
    return next(frame.value for frame in app.dataframe if "Kind" in frame.value.columns)


def _metrics(app) -> dict[str, str]:
    return {m.proto.label: m.proto.body for m in app.get("metric")}


def test_prompt_tokens_agree_with_the_tokenizers_own_template(pages, loaded):
    prompt, opened = pages
    count = len(template_ids(loaded, prompt))
    assert f"Prefill: {count:,} tokens in" in _all_text(opened[""])
    assert f"the prefill of {count:,} prompt tokens" in markdowns(opened["streaming"])[1]
    assert f"After reading all {count:,} prompt tokens" in markdowns(opened["next-token"])[1]
    assert f"for each of the prompt's **{count:,} tokens**" in _all_text(opened["kv-cache"])


def test_the_top_tokens_share_is_said_as_it_is(pages, loaded):
    prompt, opened = pages
    probs = next_token_probs(loaded, template_ids(loaded, prompt))
    top = float(probs.max())
    lesson = markdowns(opened["next-token"])[1]
    stated = _figure(re.search(r"at \*\*([\d.]+)%\*\*", lesson).group(1)) / 100
    assert stated == pytest.approx(top, abs=0.0015)
    assert f"at {stated:.1%} of {probs.size:,} tokens" in _all_text(opened[""])  # the journey map's line
    half = int(np.searchsorted(np.cumsum(np.sort(probs)[::-1]), 0.5)) + 1
    sentence = next(part for part in lesson.split(". ") if "of the probability" in part)
    if half == 1:
        assert "that one token" in sentence and f"({top:.1%})" in sentence
        _check_share_words(sentence, top)
    else:
        assert f"the top {half:,} tokens" in sentence
    cumulative = np.cumsum(np.sort(probs)[::-1])
    ninety = int(np.searchsorted(cumulative, 0.9)) + 1
    held = float(cumulative[ninety - 1])
    if ninety == 1:
        assert f"that token alone holds over 90%, and the other {probs.size - 1:,} share the remaining" in lesson
    else:
        stated = re.search(r"the top ([\d,]+) together hold ([\d.]+)% \(the fewest that reach 90%\)", lesson)
        assert int(stated.group(1).replace(",", "")) == ninety
        assert _figure(stated.group(2)) / 100 == pytest.approx(held, abs=0.0015)


def test_ttft_is_explained_by_what_it_was_made_of(pages):
    _, opened = pages
    streaming, home = opened["streaming"], opened[""]
    frames = _frames(streaming)
    content = frames[frames["Kind"] == "content"]
    ttft = float(content["At (ms)"].iloc[0])
    metric = _metrics(streaming)["Time to first token"]
    value, unit = metric.split(" ")  # "218.4 ms"; from 10 s on, "14.3 s" (lifecycle.lessons.words.ms)
    assert _ms(value, unit) == pytest.approx(ttft, abs=0.1 if unit == "ms" else 50)
    assert f"TTFT {metric}" in _all_text(home)
    prefill = _ms(*re.search(r"Prefill: [\d,]+ tokens in ([\d,.]+) (ms|s)\b", _all_text(home)).groups())
    lesson = markdowns(streaming)[1]
    share = prefill / ttft
    if "mostly the prefill" in lesson:
        assert share > 0.5
    else:
        assert f"({share:.0%})" in lesson
        told = [_figure(n) for n in re.findall(r"([\d,.]+) ms (?:before the engine|waiting in the engine|choosing)",
                                             lesson)]
        unsaid = 3 - len(told)  # parts under a millisecond go unsaid
        assert sum(told) + prefill == pytest.approx(ttft, abs=0.3 + unsaid * 1.0)
    kv = _all_text(opened["kv-cache"])
    said = re.search(r"first token after \*\*([\d,.]+) (ms|s)\*\*", kv)  # always in ms (milliseconds)
    assert said and _ms(*said.groups()) == pytest.approx(_ms(value, unit), abs=0.1 if unit == "ms" else 50)
    assert "That is the time to first token" not in kv
    journeys = _figure(re.search(r"of which its prefill took ([\d,.]+) ms", kv).group(1))
    alone = _figure(re.search(r"\(this prompt, [\d,]+ tokens: ([\d,.]+) ms\)", kv).group(1))
    held_up = re.search(r"That is ([\d,.]+)x the ([\d,.]+) ms this prompt's prefill took measured alone", kv)
    assert (held_up is not None) == (journeys > 2 * alone + 1)  # the page rounds the measured prefill to 1 ms
    if held_up:
        assert _figure(held_up.group(2)) == pytest.approx(alone, abs=0.5)
        assert _figure(held_up.group(1)) == pytest.approx(journeys / _figure(held_up.group(2)), abs=0.05)


def test_the_waterfall_is_where_the_streams_time_went(pages):
    _, opened = pages
    home, streaming = opened[""], opened["streaming"]
    bar = plotly_figure(home, "waterfall").data[0]
    stages = [label.replace("<br>", " ") for label in bar.y]
    assert not any("inspection" in s for s in stages)
    assert WAIT in stages and stages[-1] == LAST_FRAMES
    assert list(bar.base) == pytest.approx([sum(bar.x[:i]) for i in range(len(bar.x))])
    frames = _frames(streaming)
    assert sum(bar.x) == pytest.approx(float(frames["At (ms)"].iloc[-1]), abs=0.1)
    events = len(frames)
    assert f"{events} SSE events" in _all_text(home)
    assert f"**{events} server-sent events**" in markdowns(streaming)[1]


def test_the_journey_map_says_what_the_prompt_waited_for(pages):
    _, opened = pages
    sentence = next(m for m in markdowns(opened[""])
                    if "the engine" in m and ("waited" in m or "at once" in m))
    # The journey ran alone (the fixture waited for an idle engine): nothing was ahead of it.
    assert "other requests" not in sentence
    assert "at once" in sentence or "nothing else was in the engine" in sentence


def test_the_gaps_caption_says_what_happened_in_this_stream(pages):
    _, opened = pages
    streaming = opened["streaming"]
    frames = _frames(streaming)
    content = frames[frames["Kind"] == "content"]
    wire = next(code.value for code in streaming.code if code.value.startswith("data: {"))
    completion = int(re.search(r'"completion_tokens":(\d+)', wire).group(1))
    ended_by_eos = '"finish_reason":"stop"' in wire  # no stop sequences here: the end-of-sequence token, no text
    caption = next(c.value for c in streaming.caption if c.value.startswith("Each gap"))
    extra_tokens = completion - len(content) - (1 if ended_by_eos else 0)  # tokens sharing a frame with another
    together = int((content["Since previous (ms)"].iloc[1:] < 2).sum())
    if extra_tokens == 0:
        assert "more than one token" not in caption and "character spans" not in caption
    else:
        assert "more than one token" in caption
    if together:
        assert f"{together} frame" in caption and "delivery batching" in caption
    else:
        assert "batching" not in caption
    if not together and extra_tokens == 0:
        assert f"all {len(content) - 1} gaps were one step each" in caption


def test_the_kv_cache_is_compared_with_the_weights_it_is_read_beside(pages, loaded):
    prompt, opened = pages
    config = loaded.model.config
    weights = _weights_read_per_step(config, _packed_shapes(loaded))
    per_token = kv_bytes_per_token(config)
    positions = len(template_ids(loaded, prompt))
    text = _all_text(opened["kv-cache"])
    assert "whatever the prompt's length" not in text
    if positions * per_token / weights >= 0.2:
        assert "a small part of its work" not in text
    cross = math.ceil(weights / per_token)
    assert f"about **{cross:,} tokens**" in text
    assert f"**{weights / 2**20:,.1f} MiB** of weights read per step ({positions * per_token / weights:.0%})" in text
    window = _metrics(opened["kv-cache"])["Full window"]
    assert window == f"{config.max_position_embeddings * per_token / 2**20:,.2f} MiB"


def test_the_pca_caption_counts_the_directions_the_points_have(pages, loaded):
    prompt, opened = pages
    app = opened["embeddings"]
    words = [w.strip() for w in app.text_input(key="embedding_words").value.split(",") if w.strip()]
    table = loaded.model.get_input_embeddings().weight.detach().double().numpy()
    tokenizer = loaded.tokenizer
    rows = [table[tokenizer.encode(" " + w, add_special_tokens=False)].mean(axis=0) for w in words]
    prompt_ids = list(dict.fromkeys(tokenizer.encode(prompt, add_special_tokens=False)))
    points = np.vstack(rows + [table[i] for i in prompt_ids])
    centered = points - points.mean(axis=0)
    variances = np.linalg.svd(centered, compute_uv=False) ** 2
    share = variances[:2].sum() / variances.sum()
    rest = min(len(points) - 1, table.shape[1]) - 2
    caption = next(c.value for c in app.caption if "PCA" in c.value)
    assert caption.startswith(f"{len(points)} vectors of {table.shape[1]} numbers")
    assert f"hold {share:.1%} of their spread" in caption
    assert f"the other {rest:,} directions" in caption
    assert ("most of the spread is in the other" in caption) == (share < 0.5)


def test_the_context_window_is_not_a_wall_attention_cannot_pass(pages, loaded):
    _, opened = pages
    text = _all_text(opened["context-window"])
    assert "cannot attend" not in text
    assert f"trained on up to {loaded.model.config.max_position_embeddings:,} positions" in text


def test_the_long_prompt_is_long_enough_to_flip_the_kv_cache_comparison(loaded):
    """Against the least a step can read (every matrix as the GGUF's codes): which kernel each matrix gets is
    measured at start, and on a loaded machine fp32 can win a few (seen on Python 3.12: 252 MB a step), which
    moves the flip later; the page's sentence then follows its own numbers (the tests above check that)."""
    config = loaded.model.config
    positions = len(template_ids(loaded, LONG))
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    every_shape = {((config.num_attention_heads + 2 * config.num_key_value_heads) * head_dim, config.hidden_size),
                   (config.hidden_size, config.num_attention_heads * head_dim),
                   (2 * config.intermediate_size, config.hidden_size), (config.hidden_size, config.intermediate_size),
                   (config.vocab_size, config.hidden_size)}
    weights = _weights_read_per_step(config, every_shape)
    assert 1000 <= positions <= 1024 and positions * kv_bytes_per_token(config) / weights >= 0.2
