"""KV cache page: sizes from the config agree with the real cache, and the measurements are drawn."""

import re

import pytest
import torch

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.generation import generate
from lifecycle.stages.kv_cache import KVCacheShape
from lifecycle.stages.sampling import SamplingSettings
from tests.pages.harness import markdowns, plotly_figure

# One of test_truth.py's prompts: in its worker (conftest's MODULES_KEPT_TOGETHER) the page's latency sweep and three
# turns, the page's costly part, are already measured for it.
PROMPT = "Why is the sky blue?"
MAX_TOKENS = 3


@pytest.fixture(scope="module")
def app(loaded):
    from tests.pages.harness import run_page

    # The page times prefills up to 512 tokens and plays three turns: allow for a busy machine.
    return run_page("kv-cache", timeout=420, prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS)


@pytest.fixture(scope="module")
def ids() -> list[int]:
    return render_prompt(Conversation(new_message=PROMPT)).ids


def test_sizes_latency_and_turns(app, loaded, ids):
    assert not app.exception and not app.error
    shape = KVCacheShape.of(loaded.model)
    expected = f"{shape.bytes_for(len(ids)) / 2**20:,.2f} MiB"
    metrics = {m.proto.label: m.proto.body for m in app.get("metric")}
    assert metrics["This prompt's cache"] == metrics["Measured tensors"] == expected
    assert any(f"{len(ids)} positions" in m for m in markdowns(app) if "During prefill" in m)
    latency = plotly_figure(app, "kv_latency")
    assert len(ids) in list(latency.data[0].x) and max(latency.data[0].x) >= 512
    turns = app.dataframe[0].value
    sent = turns["sent"].tolist()
    assert sent[0] == len(ids) and sent == sorted(sent) and len(sent) == 3
    assert (turns["repeated"][1:].values >= turns["sent"][:-1].values).all()
    assert (turns["cached_tokens"][1:].values >= turns["sent"][:-1].values).all()  # the prefix cache served them
    # Turn 1 sends the prompt's own ids: its prefill from scratch is the sweep's point for them, timed once.
    own = dict(zip(latency.data[0].x, latency.data[0].y))[len(ids)]
    assert turns["from scratch (ms)"][0] == round(own, 1)


def _size(count: int) -> str:
    return f"{count / 1024:,.1f} KiB" if count < 2**20 else f"{count / 2**20:,.2f} MiB"


def test_lesson_numbers_follow_from_the_models_config_and_this_run(app, loaded, ids):
    """The cache sizes in the lesson, recomputed here from the config alone, and the run's own length."""
    detail = next(m for m in markdowns(app) if "During prefill" in m)
    config = loaded.model.config
    head_dim = config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * config.num_key_value_heads * head_dim * 2 * torch.finfo(loaded.model.dtype).bits // 8
    ratio = config.num_attention_heads // config.num_key_value_heads
    lesson = next(m for m in markdowns(app) if "keeps a key and a value vector" in m)
    assert f"each of the prompt's **{len(ids):,} tokens**: **{_size(per_token * len(ids))}**" in lesson
    assert f"and **{_size(per_token)}** more per generated token" in lesson
    assert f"among {ratio} query heads (grouped-query attention) makes it {ratio}x smaller" in lesson
    assert f"the prompt's {len(ids):,} tokens" in detail
    assert f"{len(ids):,} positions x {torch.finfo(loaded.model.dtype).bits // 8} bytes = {_size(per_token * len(ids))}" in detail
    assert f"adding {_size(per_token)} per token" in detail
    generated = generate(loaded, ids, SamplingSettings(temperature=0.0), MAX_TOKENS).completion_tokens
    positions = len(ids) + generated - 1  # the last token is returned, never fed back
    assert f"after this run's {generated} generated tokens it holds {positions:,} positions ({_size(per_token * positions)})" in detail
    assert f"the cache is {ratio}x smaller" in detail and f"({_size(per_token * ratio)} per token)" in detail
    replay = _replay(app)
    assert replay["marks"] == [["this prompt", len(ids)], ["after the answer", positions],
                               ["full window", loaded.context_window]]
    assert per_token == replay["layers"] * replay["kv_heads"] * replay["head_dim"] * 2 * replay["bytes_per_number"]


def _replay(app) -> dict:
    import json

    (replay,) = [c for c in app.get("bidi_component") if "kv_growth_replay" in c.proto.id]
    return json.loads(replay.proto.json)


def test_prefix_cache_sentence_reads_the_turns_table(app):
    """The sentence under "Prefix caching" names the last turn's numbers drawn in the table beside it."""
    text = next(m for m in markdowns(app) if "The API is stateless" in m)
    last = {column: int(values.iloc[-1]) for column, values in app.dataframe[0].value.items()
            if column in ("turn", "sent", "repeated", "cached_tokens")}
    found = re.search(r"turn (\d+) of this conversation sends all \*\*([\d,]+) tokens\*\* of its history again, of which "
                      r"([\d,]+) repeat", text)
    assert found and [int(n.replace(",", "")) for n in found.groups()] == [last["turn"], last["sent"], last["repeated"]]
    assert f"reported **{last['cached_tokens']:,}** cached tokens on turn {last['turn']}" in text
    first = {column: int(values.iloc[0]) for column, values in app.dataframe[0].value.items()
             if column in ("sent", "cached_tokens")}
    if first["cached_tokens"] == first["sent"] - 1:  # the journey ran this very prompt just before
        assert f"Even turn 1 found {first['cached_tokens']:,} of its {first['sent']:,} tokens cached: the journey" in text
    elif first["cached_tokens"]:
        assert f"Even turn 1 found its first {first['cached_tokens']:,} of {first['sent']:,} tokens cached" in text
    else:
        assert "Even turn 1" not in text
