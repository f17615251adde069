"""The journey map's lines and notes not checked in test_truth.py, for two prompts, against a recomputation.

The home page runs under AppTest at temperature 0. Each stage's line is recomputed without lifecycle.journey:
the prompt's tokens with the tokenizer itself, the chat template with its own ``apply_chat_template``, the
model's shape and window from its config, the answer with transformers' own greedy ``generate`` and its text
with the tokenizer's ``decode``; the call's length must be the Streaming page's last event. The small-model
note's fixed claims (the greedy answer, the odds after "The capital of India is", the seeded draw's answer)
are recomputed with transformers' own forward pass and by running the app at the note's own settings.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.pages.harness import duration_ms, duration_rounding, markdowns, run_page
from tests.pages.recompute import finish_reason, next_token_probs, template_ids, transformers_greedy
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
MAX_TOKENS = 30
PROBABILITY_ABS = 0.0015


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def home(request, loaded) -> dict:
    prompt = request.param
    app = run_page("", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    ids = template_ids(loaded, prompt)
    return {"prompt": prompt, "app": app, "ids": ids, "new": transformers_greedy(loaded, ids, MAX_TOKENS)[0],
            "text": " | ".join([m for m in markdowns(app)] + [c.value for c in app.caption]).replace("\\", "")}


def _ms(number: str, unit: str) -> float:
    return duration_ms(f"{number} {unit}")


def test_each_stage_line_is_this_prompts(home, loaded):
    text, ids, new, config = home["text"], home["ids"], home["new"], loaded.model.config
    tokens = len(reference_tokenizer(loaded).encode(home["prompt"], add_special_tokens=False))
    finish = finish_reason(loaded, new)
    assert f"1 message, stream=true, max_tokens={MAX_TOKENS}; built in" in text
    assert re.search(rf"\b{tokens} tokens in [\d.,]+ (ms|s)\b", text)
    assert (f"Chat template: {len(ids):,} tokens in all ({len(ids) - tokens:,} added by the template) of "
            f"{config.max_position_embeddings:,};") in text
    assert f"{len(ids)} vectors of {config.hidden_size} numbers" in text
    assert f"{config.num_hidden_layers} layers × {config.num_attention_heads} heads; inspection pass" in text
    assert f"1 of {config.vocab_size:,} tokens left in play after sampling" in text  # temperature 0: the top token
    assert re.search(rf"Decode: {len(new)} tokens, [\d.,]+ (ms|s) each on average \({finish}\)", text)
    characters = len(reference_tokenizer(loaded).decode(new, skip_special_tokens=True))
    assert re.search(rf"\b{len(new)} tokens → {characters:,} characters in", text)
    assert (f"the prefill of {len(ids):,} prompt tokens and {len(new):,} decode steps") in text


def test_the_model_caption_is_the_config(home, loaded):
    config = loaded.model.config
    assert (f"{config.num_hidden_layers} layers, {config.num_attention_heads} attention heads, "
            f"{config.vocab_size:,} tokens in its vocabulary, a context window of "
            f"{config.max_position_embeddings:,} tokens") in home["text"]
    parameters = sum(p.numel() for p in loaded.model.parameters())  # the tied head counted once
    note = next(i.value for i in home["app"].info if "very small model" in i.value)
    assert f"{parameters / 1e6:,.0f} million parameters" in note


def test_the_calls_length_is_the_streams_last_event_and_the_models_work_its_parts(home):
    streaming = run_page("streaming", prompt=home["prompt"], temperature=0, max_tokens=MAX_TOKENS)
    assert not streaming.exception and not streaming.error
    frames = next(frame.value for frame in streaming.dataframe if "Kind" in frame.value.columns)
    took = re.search(r"Your prompt's call took \*\*([\d.,]+) (ms|s)\*\*", home["text"]).groups()
    last = float(frames["At (ms)"].iloc[-1])
    assert _ms(*took) == pytest.approx(last, abs=duration_rounding(" ".join(took)))
    model = _ms(*re.search(r"decode steps — took \*\*([\d.,]+) (ms|s)\*\*", home["text"]).groups())
    prefill = _ms(*re.search(r"Prefill: [\d,]+ tokens in ([\d.,]+) (ms|s)\b", home["text"]).groups())
    steps, mean, unit = re.search(r"Decode: ([\d,]+) tokens, ([\d.,]+) (ms|s) each", home["text"]).groups()
    assert model == pytest.approx(prefill + int(steps.replace(",", "")) * _ms(mean, unit), abs=1 + int(steps.replace(",", "")) * 0.5)
    assert model <= last  # the model's work is part of the call


def test_the_small_model_notes_claims_hold(loaded):
    home = run_page("", prompt=PROMPTS[0], temperature=0)
    note = next(i.value for i in home.info if "very small model" in i.value).replace("\\", "")
    ids = template_ids(loaded, PROMPTS[0])
    assert "New Delhi" in reference_tokenizer(loaded).decode(transformers_greedy(loaded, ids, MAX_TOKENS)[0])
    assert "answers New Delhi" in note
    temperature, seed, answer = re.search(r"at temperature ([\d.]+) with seed (\d+) it says \"(.*?)\" ", note).groups()
    start = answer[:answer.index(" is ") + 3]  # "The capital of India is"
    odds = [(token.strip("`"), p) for token, p in
            re.findall(r"(\S+) ([\d.]+)%", note.split(f"its odds at temperature {temperature} were", 1)[-1].split(":", 1)[0])]
    assert len(odds) >= 3, note
    model = next_token_probs(loaded, ids + reference_tokenizer(loaded).encode(start, add_special_tokens=False))
    probs = model ** (1 / float(temperature)) / (model ** (1 / float(temperature))).sum()  # softmax(logits / T)
    assert f"its odds at temperature {temperature} were" in note  # the draw's own odds, not the model's at T = 1
    order = np.argsort(-probs)[:len(odds)]
    for (token, stated), rank in zip(odds, order):
        assert token.replace("␣", " ") == reference_tokenizer(loaded).decode([int(rank)])
        assert float(stated) / 100 == pytest.approx(probs[rank], abs=PROBABILITY_ABS)
    third = odds[2][0].replace("␣", " ").strip()
    assert "landed on the third choice" in note and third in answer.removeprefix(start)
    drawn = run_page("detokenization", prompt=PROMPTS[0], temperature=temperature, seed=seed)
    assert not drawn.exception and not drawn.error
    assert answer in [t.value for t in drawn.text] or any(answer in c.value for c in drawn.code)
