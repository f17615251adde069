"""Every number the Sampling page states, for two prompts and three settings, against a recomputation.

The page runs under AppTest; this file recomputes what it states without lifecycle.stages.sampling or the
page's charts: the logits with transformers' own forward pass of the loaded model on the prompt the
tokenizer's ``apply_chat_template`` renders, and every later stage (logit bias, presence and frequency
penalties, the repetition penalty, temperature, top-k, top-p, min-p, renormalisation, the entropy, the
draws) with plain numpy written out below: a full sort for top-p, where lifecycle bins by probability.
The Next token page must state the same top probability and entropy.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter

import numpy as np
import pytest
import torch

from tests.pages.harness import _typed_array, markdowns, run_page
from tests.pages.recompute import template_ids
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
# The journey's settings the page opens with: greedy (the what-if then opens at temperature 1, the model's own
# distribution), and one where the repetition penalty, top-k and top-p each act.
SETTINGS = {
    "greedy": dict(temperature=0, seed=7),
    "sampled": dict(temperature=0.8, top_p=0.9, top_k=40, min_p=0.02, repetition_penalty=1.1, seed=1234),
    "wide": dict(temperature=1.3, top_p=0.97, top_k=500, min_p=0.01, repetition_penalty=1.3, seed=42),
}
# The API stages' what-if: a -100 bias on the first token offered (the most likely), and both penalties.
API = dict(bias=-100.0, presence=0.5, frequency=0.3)
# The engine's prefill and transformers' forward pass agree to about 1e-4 in a logit (float rounding):
# a probability to well under the 0.05 points a page prints, and no token crosses a top-p or min-p line.
PROBABILITY_ABS = 5e-4
TAIL_RANKS, TAIL_TEMPERATURE = 1000, 2.0
DRAWN_TOKENS = 12  # the draws chart's bars, then one for all other tokens




def _logits(loaded, ids: list[int]) -> np.ndarray:
    with loaded.lock, torch.inference_mode():
        return loaded.model(input_ids=torch.tensor([ids])).logits[0, -1].double().numpy()


def _softmax(scores: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    weights = np.exp((scores - scores.max()) / temperature)
    return weights / weights.sum()


def _bits(probs: np.ndarray) -> float:
    p = probs[probs > 0]
    return float(-(p * np.log2(p)).sum())


def _sample(logits, previous, temperature, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0, bias=None,
            presence=0.0, frequency=0.0, allowed=None) -> dict:
    """The stages in the order OpenAI-compatible servers (vLLM) run them: what each moved or removed, and the
    distribution the token is drawn from. ``allowed`` is a grammar's mask: the other tokens are out before
    temperature and the cuts."""
    scores = logits.copy()
    counts = Counter(previous)
    seen = np.array(sorted(counts))
    moved = {}
    if bias:
        for token, value in bias.items():
            scores[token] += value
        moved["logit bias"] = (len(bias), max(abs(v) for v in bias.values()))
    if presence:
        scores[seen] -= presence
        moved["presence penalty"] = (len(seen), abs(presence))
    if frequency:
        amounts = frequency * np.array([counts[i] for i in seen], dtype=float)
        scores[seen] -= amounts
        moved["frequency penalty"] = (len(seen), float(np.abs(amounts).max()))
    if repetition_penalty != 1:
        before = scores[seen].copy()
        scores[seen] = np.where(before > 0, before / repetition_penalty, before * repetition_penalty)
        changed = scores[seen] != before
        moved["repetition penalty"] = (int(changed.sum()), float(np.abs(scores[seen] - before).max()))
    size = logits.size
    removed = {stage: 0 for stage in ("temperature", "top-k", "top-p", "min-p")}
    grammar = np.ones(size, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    removed["grammar mask (response_format)"] = int((~grammar).sum())
    scores = np.where(grammar, scores, -np.inf)
    if temperature == 0:
        final = np.zeros(size)
        final[int(np.argmax(scores))] = 1.0
        removed["temperature"] = int(grammar.sum()) - 1
        return dict(final=final, removed=removed, moved=moved, kept=1, nucleus=None, before_top_p=None)
    probs = _softmax(scores, temperature)
    alive = grammar & (probs > 0)
    removed["temperature"] = int((grammar & ~alive).sum())
    if 0 < top_k < size:
        order = np.lexsort((np.arange(size), -scores))  # highest score first, lower id first on a tie
        outside = np.ones(size, dtype=bool)
        outside[order[:top_k]] = False
        removed["top-k"] = int((alive & outside).sum())
        alive &= ~outside
    before_top_p = np.where(alive, probs, 0.0) / probs[alive].sum()
    nucleus = None
    if top_p < 1:
        order = np.lexsort((np.arange(size), -before_top_p))
        cumulative = np.cumsum(before_top_p[order])
        nucleus = int(np.searchsorted(cumulative, top_p, side="left")) + 1  # the smallest set reaching top_p
        inside = np.zeros(size, dtype=bool)
        inside[order[:nucleus]] = True
        removed["top-p"] = int((alive & ~inside).sum())
        alive &= inside
    if min_p > 0:
        cut = alive & (probs < min_p * probs[alive].max())
        removed["min-p"] = int(cut.sum())
        alive &= ~cut
    final = np.where(alive, probs, 0.0)
    final /= final.sum()
    return dict(final=final, removed=removed, moved=moved, kept=int(alive.sum()), nucleus=nucleus,
                before_top_p=before_top_p)


def _json_object_prefix(text: str) -> bool:
    """Whether ``text`` can begin a JSON object as response_format json_object has it written: ", " and ": "
    as the only separators, no other whitespace (a character-by-character parser with a stack)."""
    stack, state, i = [], "start", 0
    key = False
    literal = ""
    number = ""
    NUMBER = re.compile(r"-?(0|[1-9]\d*)?(\.\d*)?([eE][+-]?\d*)?")
    COMPLETE = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
    def value_start(c):
        nonlocal state, literal, number, key
        if c == "{": stack.append("}"); state = "object_first"
        elif c == "[": stack.append("]"); state = "array_first"
        elif c == '"': state, key = "string", False
        elif c in "-0123456789": state, number = "number", c
        elif c in "tfn":
            literal = {"t": "rue", "f": "alse", "n": "ull"}[c]; state = "literal"
        else: return False
        return True
    while i < len(text):
        c = text[i]
        if state == "start":
            if c != "{": return False
            stack.append("}"); state = "object_first"
        elif state == "object_first":
            if c == '"': state, key = "string", True
            elif c == "}": stack.pop(); state = "after"
            else: return False
        elif state == "key":
            if c != '"': return False
            state, key = "string", True
        elif state == "string":
            if c == "\\": state = "escape"
            elif c == '"': state = "colon" if key else "after"
            elif ord(c) < 0x20: return False
        elif state == "escape":
            if c in '"\\/bfnrt': state = "string"
            elif c == "u": state, literal = "hex", ""
            else: return False
        elif state == "hex":
            if c not in "0123456789abcdefABCDEF": return False
            literal += c
            if len(literal) == 4: state = "string"
        elif state == "colon":
            if c != ":": return False
            state = "colon_space"
        elif state == "colon_space":
            if c != " ": return False
            state = "value"
        elif state in ("value", "array_first"):
            if state == "array_first" and c == "]": stack.pop(); state = "after"
            elif not value_start(c): return False
        elif state == "literal":
            if not literal or c != literal[0]: return False
            literal = literal[1:]
            if not literal: state = "after"
        elif state == "number":
            if NUMBER.fullmatch(number + c): number += c
            elif COMPLETE.fullmatch(number): state = "after"; continue
            else: return False
        elif state == "after":
            if not stack: return False
            if c == ",": state = "comma_space"
            elif c == stack[-1]: stack.pop()
            else: return False
        elif state == "comma_space":
            if c != " ": return False
            state = "key" if stack[-1] == "}" else "value"
        i += 1
    return True


def _draws(final: np.ndarray, seed: int, draws: int) -> np.ndarray:
    """``draws`` tokens from ``final``: one uniform number each from numpy's PCG64 seeded with ``seed``,
    looked up in the cumulative distribution (greedy: always the top token)."""
    if np.count_nonzero(final) == 1:
        return np.full(draws, int(np.argmax(final)))
    cdf = np.cumsum(final)
    picks = np.searchsorted(cdf, np.random.default_rng(seed).random(draws) * cdf[-1], side="right")
    return np.minimum(picks, final.size - 1)


def _percent(text: str) -> float:
    return float(text.replace(",", "")) / 100


def _lesson(app) -> str:
    return next(m for m in markdowns(app) if m.startswith("The model's most likely next token"))


def _caption(app, start: str) -> str:
    return next(c.value for c in app.caption if c.value.startswith(start))


def _metrics(app) -> dict[str, str]:
    return {m.proto.label: m.proto.body for m in app.get("metric")}


def _figure(app, key: str) -> dict:
    spec = next(chart for chart in app.get("plotly_chart") if chart.proto.id.endswith(key)).proto.spec
    return json.loads(spec, object_hook=_typed_array)


def _browser_logits(app) -> np.ndarray:
    """The logits the page sent to the browser's live chart (little-endian float32, base64)."""
    (live,) = [c for c in app.get("bidi_component") if c.proto.id.endswith("what_if_live")]
    return np.frombuffer(base64.b64decode(json.loads(live.proto.json)["logits"]), dtype="<f4").astype(np.float64)


def _stage_table(app):
    return next(frame.value for frame in app.dataframe if "What it did" in frame.value.columns)


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def prompt(request, loaded):
    prompt = request.param
    ids = template_ids(loaded, prompt)
    next_token = run_page("next-token", prompt=prompt, temperature=0)
    assert not next_token.exception
    return prompt, ids, _logits(loaded, ids), next_token


@pytest.fixture(scope="module", params=list(SETTINGS))
def page(request, prompt):
    text, ids, logits, next_token = prompt
    settings = SETTINGS[request.param]
    app = run_page("sampling", prompt=text, **settings)
    assert not app.exception and not app.error
    # The what-if sliders open at the journey's settings, except that greedy opens at temperature 1.
    what_if = dict(temperature=settings["temperature"] or 1.0, top_p=settings.get("top_p", 1.0),
                   top_k=settings.get("top_k", 0), min_p=settings.get("min_p", 0.0),
                   repetition_penalty=settings.get("repetition_penalty", 1.0))
    return app, settings, what_if, ids, logits, next_token


def _check_lesson(app, logits, ids, what_if, expected) -> None:
    base = _softmax(logits)
    top = int(np.argmax(base))
    lesson = _lesson(app)
    stated = re.search(r"chance becomes \*\*([\d.]+)%\*\* and the entropy \*\*(-?[\d.]+) bits\*\*", lesson)
    head = re.search(r"has a \*\*([\d.]+)%\*\* chance, and the distribution's entropy is \*\*([\d.]+) bits\*\*",
                     lesson)
    assert head and stated, lesson
    # Percentages are printed to 0.1 points, entropies to 0.01 bits: half of that, plus the engine's rounding.
    assert _percent(head.group(1)) == pytest.approx(base[top], abs=0.0005 + PROBABILITY_ABS)
    assert float(head.group(2)) == pytest.approx(_bits(base), abs=0.005 + 0.002)
    assert _percent(stated.group(1)) == pytest.approx(expected["final"][top], abs=0.0005 + PROBABILITY_ABS)
    assert float(stated.group(2)) == pytest.approx(_bits(expected["final"]), abs=0.005 + 0.002)
    assert not stated.group(2).startswith("-")  # an entropy is never negative, not even "-0.00"
    assert f"**{expected['kept']:,} of {logits.size:,}** tokens stay in play" in lesson
    what = ("greedy decoding (temperature 0)" if what_if["temperature"] == 0 else
            f"temperature {what_if['temperature']:g}, top-p {what_if['top_p']:g}, top-k {what_if['top_k']} "
            f"and min-p {what_if['min_p']:g}")
    assert f"with {what} and a repetition penalty of {what_if['repetition_penalty']:g}," in lesson
    metrics = _metrics(app)
    assert metrics["Entropy before"] == f"{float(head.group(2)):.2f} bits"
    assert metrics["Entropy after"] == f"{float(stated.group(2)):.2f} bits"
    assert metrics["Tokens that survive"] == f"{expected['kept']:,}"
    assert metrics["Tokens removed"] == f"{logits.size - expected['kept']:,}"


def _survivors(expected: dict, size: int) -> list[int]:
    """Tokens still in play after the vocabulary, the grammar mask, the repetition penalty (which removes none),
    temperature, top-k, top-p and min-p."""
    left, counts = size, [size]
    for stage in ("grammar mask (response_format)", None, "temperature", "top-k", "top-p", "min-p"):
        left -= expected["removed"].get(stage, 0) if stage else 0
        counts.append(left)
    return counts


def test_the_lesson_and_metrics_are_the_recomputed_distribution(page):
    app, _, what_if, ids, logits, _ = page
    expected = _sample(logits, ids, **what_if)
    _check_lesson(app, logits, ids, what_if, expected)
    assert [int(x) for x in _figure(app, "survivors")["data"][0]["x"]] == _survivors(expected, logits.size)


def _check_stage_table(app, expected: dict, size: int) -> None:
    rows = {row["Stage"]: row for _, row in _stage_table(app).iterrows()}
    left = size
    for stage in ("grammar mask (response_format)", "logit bias", "presence penalty", "frequency penalty",
                  "repetition penalty", "temperature", "top-k", "top-p", "min-p"):
        row = rows[stage]
        if stage in expected["moved"]:
            count, largest = expected["moved"][stage]
            found = re.fullmatch(r"moved ([\d,]+) logits? \(by up to ([\d.]+)\)", row["What it did"])
            assert found and int(found.group(1).replace(",", "")) == count, row["What it did"]
            assert float(found.group(2)) == pytest.approx(largest, abs=0.005 + 1e-3)  # printed to 0.01
        elif expected["removed"].get(stage):
            gone = expected["removed"][stage]
            assert row["What it did"] == f"removed {gone:,} token{'s' * (gone != 1)}"
            left -= gone
        else:
            assert row["What it did"] == "nothing"
        assert row["Tokens in play"] == left
    assert left == expected["kept"]


def test_the_stage_table_says_what_each_stage_moved_and_removed(page):
    app, _, what_if, ids, logits, _ = page
    expected = _sample(logits, ids, **what_if)
    _check_stage_table(app, expected, logits.size)
    # What the token is drawn from: the ten most likely survivors, each beside the model's own probability.
    bar = _figure(app, "api_drawn_from")["data"][0]
    final = expected["final"]
    top = np.lexsort((np.arange(final.size), -final))[:min(10, np.count_nonzero(final))]
    np.testing.assert_allclose(np.asarray(bar["x"], float), final[top], atol=PROBABILITY_ABS)
    np.testing.assert_allclose(np.asarray(bar["customdata"], float), _softmax(logits)[top], atol=PROBABILITY_ABS)
    shown = np.array([_percent(t.removesuffix("%")) for t in bar["text"]])
    np.testing.assert_allclose(shown, final[top], atol=0.0005 + PROBABILITY_ABS)  # printed to 0.1 points


def test_the_live_chart_shows_the_models_top_25(page):
    app, _, what_if, ids, logits, _ = page
    (live,) = [c for c in app.get("bidi_component") if c.proto.id.endswith("what_if_live")]
    data = json.loads(live.proto.json)
    assert data["settings"] == {knob: what_if[knob] for knob in ("temperature", "top_p", "top_k", "min_p")}
    model = _softmax(logits)  # "The model's top 25 tokens before and after sampling": its own, before any stage
    top = np.lexsort((np.arange(logits.size), -model))[:25]
    assert [row["id"] for row in data["shown"]] == top.tolist()
    np.testing.assert_allclose([row["base"] for row in data["shown"]], model[top], atol=PROBABILITY_ABS)
    # The logits the repetition penalty moved, sent beside the raw ones: the prompt's distinct tokens.
    moved = dict((int(i), v) for i, v in data["moved"])
    penalty = what_if["repetition_penalty"]
    if penalty == 1:
        assert moved == {}
    else:
        seen = sorted(set(ids))
        assert sorted(moved) == seen
        expected = np.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty)
        np.testing.assert_allclose([moved[i] for i in seen], expected, atol=1e-3)


def test_the_differences_caption_compares_with_the_journey(page):
    app, settings, what_if, *_ = page
    caption = next(c.value for c in app.caption if c.value.startswith("Not the journey's settings")
                   or c.value == "The sliders start at the journey's settings.")
    if settings["temperature"] == 0:
        assert caption == ("Not the journey's settings: temperature 1 here, 0 in the journey "
                           "(greedy: it always takes the top token).")
    else:
        assert caption == "The sliders start at the journey's settings."


def test_the_tail_beyond_the_top_thousand_is_what_it_says(page):
    app, _, _, _, logits, _ = page
    caption = _caption(app, "Your browser has the logits of all")
    assert caption.startswith(f"Your browser has the logits of all {logits.size:,} tokens (float32)")
    tail = np.sort(_softmax(logits, TAIL_TEMPERATURE))[::-1][TAIL_RANKS:].sum()
    found = re.search(rf"at temperature {TAIL_TEMPERATURE:g} the tokens beyond the top {TAIL_RANKS:,} still hold "
                      r"\*\*(\d+)%\*\*", caption)
    assert found and _percent(found.group(1)) == pytest.approx(tail, abs=0.005 + PROBABILITY_ABS)  # whole percent


def test_the_nucleus_is_the_smallest_set_reaching_top_p(page):
    app, _, what_if, ids, logits, _ = page
    expected = _sample(logits, ids, **what_if)
    if what_if["top_p"] == 1:
        assert any(c.value == "top_p = 1: top-p is off. The curve shows the 100 most likely tokens." for c in app.caption)
        return
    nucleus = expected["nucleus"]
    before = np.sort(expected["before_top_p"])[::-1]
    ranks = min(int(np.count_nonzero(before)), max(100, 3 * nucleus), 2000)
    caption = _caption(app, "Top-p keeps the smallest set")
    assert f"add up to at least {what_if['top_p']:g}: here **{nucleus:,}** token{'s' * (nucleus != 1)}." in caption
    assert caption.endswith(f"Curve cut at the {ranks:,} most likely tokens.")
    curve = np.asarray(_figure(app, "nucleus")["data"][0]["y"], dtype=float)
    np.testing.assert_allclose(curve, np.cumsum(before[:ranks]), atol=PROBABILITY_ABS)
    assert curve[nucleus - 1] >= what_if["top_p"] and (nucleus == 1 or curve[nucleus - 2] < what_if["top_p"])


def test_the_browser_has_the_models_logits(page):
    app, _, _, _, logits, _ = page
    browser = _browser_logits(app)
    assert browser.shape == logits.shape
    assert np.abs(browser - logits).max() < 1e-3  # the engine's prefill against transformers': float rounding


def test_the_draws_are_what_a_seeded_draw_gives(page):
    app, settings, what_if, ids, logits, _ = page
    # A draw in the long tail lands among tokens of about 1e-7 each, so it moves with the logits' last float
    # digits: the draws are redone from the logits the page has (checked against transformers' above), with
    # this file's own sampling stages and its own seeded generator.
    expected = _sample(_browser_logits(app), ids, **what_if)
    picks = _draws(expected["final"], settings["seed"], 1000)  # the page opens at 1,000 draws
    caption = _caption(app, "1,000 real draws")
    distinct = len(set(picks.tolist()))
    assert (f"seeded with {settings['seed']}: **{distinct:,}** different token{'s' * (distinct != 1)} came up."
            in caption)
    # "that gap is just chance": each drawn share is within four binomial standard deviations of its probability.
    bars = _figure(app, "draws")["data"]
    shown_expected, shown_observed = np.asarray(bars[0]["y"], float), np.asarray(bars[1]["y"], float)
    top = np.lexsort((np.arange(logits.size), -expected["final"]))[:DRAWN_TOKENS]
    top = top[expected["final"][top] > 0]
    np.testing.assert_allclose(shown_expected[:len(top)], expected["final"][top], atol=PROBABILITY_ABS)
    np.testing.assert_allclose(shown_observed[:len(top)], np.bincount(picks, minlength=logits.size)[top] / 1000)
    spread = 4 * np.sqrt(shown_expected * (1 - shown_expected) / 1000) + 1 / 1000
    assert (np.abs(shown_observed - shown_expected) <= spread).all()


def test_the_next_token_page_states_the_same_distribution(page):
    app, _, _, _, _, next_token = page
    lesson = _lesson(app)
    top = re.search(r"has a \*\*([\d.]+)%\*\* chance", lesson).group(1)
    entropy = re.search(r"entropy is \*\*([\d.]+) bits\*\*", lesson).group(1)
    assert f"at **{top}%**" in markdowns(next_token)[1]
    assert _metrics(next_token)["Entropy"] == f"{entropy} bits"


def test_the_api_stages_move_and_remove_what_they_say(page, loaded):
    app, _, what_if, ids, logits, _ = page
    app.session_state["what_if_temperature"] = what_if["temperature"]  # as the page opened, whatever ran before
    token = app.selectbox(key="api_bias_token").value
    assert token == int(np.argmax(logits))  # the first token offered is the most likely
    app.slider(key="api_bias").set_value(API["bias"])
    app.slider(key="api_presence").set_value(API["presence"])
    app.slider(key="api_frequency").set_value(API["frequency"])
    app.run()
    assert not app.exception
    expected = _sample(logits, ids, **what_if, bias={token: API["bias"]}, presence=API["presence"],
                       frequency=API["frequency"])
    _check_stage_table(app, expected, logits.size)
    rows = {row["Stage"]: row["What it did"] for _, row in _stage_table(app).iterrows()}
    assert rows["logit bias"] == "moved 1 logit (by up to 100.00)"
    lesson = next(m for m in markdowns(app) if m.startswith("No response_format is set"))
    kept = expected["kept"]
    stay = "token stays" if kept == 1 else "tokens stay"
    assert lesson.endswith(f"Then the sliders above take over, and **{kept:,}** {stay} in play.")


def test_a_greedy_what_if_keeps_only_the_top_token(page):
    app, settings, what_if, ids, logits, _ = page
    app.session_state["what_if_temperature"] = 0.0
    app.run()
    assert not app.exception
    greedy = dict(what_if, temperature=0.0)
    expected = _sample(logits, ids, **greedy)
    _check_lesson(app, logits, ids, greedy, expected)
    assert any("At temperature 0 decoding is greedy" in info.value for info in app.info)
    assert [int(x) for x in _figure(app, "survivors")["data"][0]["x"]] == _survivors(expected, logits.size)
    journey = settings["temperature"]
    said = next(c.value for c in app.caption if c.value.startswith("Not the journey's settings")
                or c.value == "The sliders start at the journey's settings.")
    assert said == ("The sliders start at the journey's settings." if journey == 0 else
                    f"Not the journey's settings: temperature 0 here, {journey:g} in the journey.")


@pytest.fixture(scope="module")
def json_object_start(loaded) -> np.ndarray:
    """Which tokens can be the first of a JSON object: a whole-character token text that begins one."""
    special = set(reference_tokenizer(loaded).all_special_ids)
    texts = reference_tokenizer(loaded).batch_decode([[i] for i in range(len(reference_tokenizer(loaded)))])
    return np.array([i not in special and "\ufffd" not in text and bool(text) and _json_object_prefix(text)
                     for i, text in enumerate(texts)])


def test_the_json_object_mask_keeps_the_tokens_that_can_start_an_object(page, json_object_start):
    app, _, what_if, ids, logits, _ = page
    # This page's app is shared by the tests for one prompt and setting: undo what the others moved.
    app.session_state["what_if_temperature"] = what_if["temperature"]
    app.toggle(key="api_grammar").set_value(True)
    for key in ("api_bias", "api_presence", "api_frequency"):
        app.slider(key=key).set_value(0.0)
    app.run()
    assert not app.exception
    expected = _sample(logits, ids, **what_if, allowed=json_object_start)
    allowed = int(json_object_start.sum())
    lesson = next(m for m in markdowns(app) if m.startswith("The grammar mask removed"))
    assert lesson.startswith(f"The grammar mask removed **{logits.size - allowed:,} of {logits.size:,}** tokens: "
                             f"only **{allowed:,}** can start a JSON object.")
    _check_stage_table(app, expected, logits.size)
