"""The live sampling chart's data: the browser gets Python's exact logits, the repetition penalty's moves,
labels as plain text and the sliders' ranges. (tests/browser/test_sampling_slider.py checks that the
browser's transform then gives apply_sampling's probabilities.)"""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest

from charts.live_sampling import LIVE_KNOBS, encoded_logits, live_sampling_data, live_settings, tail_share
from lifecycle.stages.sampling import STAGES, SamplingSettings, apply_sampling
from lifecycle.stages.vocabulary import show_token

JS = Path(__file__).resolve().parents[1] / "ui" / "live_sampling.js"
VOCABULARY = 49152
KNOBS = {
    "temperature": {"label": "Temperature", "low": 0.0, "high": 2.0, "step": 0.05, "help": ""},
    "top_p": {"label": "Top-p", "low": 0.01, "high": 1.0, "step": 0.01, "help": ""},
    "top_k": {"label": "Top-k", "low": 0, "high": 1000, "step": 1, "help": "", "choices": [0, 1, 10, 40]},
    "min_p": {"label": "Min-p", "low": 0.0, "high": 1.0, "step": 0.01, "help": ""},
    "repetition_penalty": {"label": "Repetition penalty", "low": 0.5, "high": 2.0, "step": 0.05, "help": ""},
}
# Token texts a model can produce: whitespace, markup and a script end tag must all arrive as text.
TEXTS = [" the", "\n", "</script><img src=x onerror=alert(1)>", "<b>bold</b>", '"quoted"', ""]


@pytest.fixture(scope="module")
def model_logits() -> np.ndarray:
    """Logits shaped like a small model's: float32, one per token of a 49,152-token vocabulary."""
    return (np.random.default_rng(7).standard_normal(VOCABULARY) * 3).astype(np.float32)


def token_text(token_id: int) -> str:
    return TEXTS[token_id % len(TEXTS)]


def decoded(data: dict) -> np.ndarray:
    dtype = "<f4" if data["dtype"] == "float32" else "<f8"
    return np.frombuffer(base64.b64decode(data["logits"]), dtype=dtype)


def test_the_browser_gets_every_logit_exactly(model_logits):
    data = live_sampling_data(model_logits, [], SamplingSettings(), token_text, 25, KNOBS)
    assert data["vocabulary"] == VOCABULARY and data["dtype"] == "float32"
    assert np.array_equal(decoded(data), model_logits)
    assert data["moved"] == []
    # float64 logits that float32 would round travel as float64.
    precise = model_logits.astype(np.float64) + 1e-9
    payload, dtype = encoded_logits(precise)
    assert dtype == "float64" and np.array_equal(np.frombuffer(base64.b64decode(payload), "<f8"), precise)


def test_the_repetition_penalty_runs_in_python_and_its_moves_are_sent(model_logits):
    previous = [5, 17, 17, 300, 4000]
    settings = SamplingSettings(temperature=0.8, top_p=0.9, repetition_penalty=1.3)
    data = live_sampling_data(model_logits, previous, settings, token_text, 25, KNOBS)
    shift = apply_sampling(model_logits, settings, previous).shift("repetition_penalty")
    assert sorted(i for i, _ in data["moved"]) == sorted(int(i) for i in shift.ids) == [5, 17, 300, 4000]
    scores = decoded(data).astype(np.float64)
    for token_id, value in data["moved"]:
        scores[token_id] = value
    # What the browser starts from, run through the later stages alone, is the whole pipeline's answer.
    later = apply_sampling(scores, SamplingSettings(temperature=0.8, top_p=0.9))
    assert np.array_equal(later.final_probs, apply_sampling(model_logits, settings, previous).final_probs)
    # A different penalty is a different payload for the browser's cache.
    other = live_sampling_data(model_logits, previous, SamplingSettings(), token_text, 25, KNOBS)
    assert other["fingerprint"] != data["fingerprint"] and other["moved"] == []


def test_shown_tokens_are_the_model_top_ones_labelled_as_text(model_logits):
    data = live_sampling_data(model_logits, [], SamplingSettings(temperature=0.5), token_text, 25, KNOBS)
    base = apply_sampling(model_logits, SamplingSettings()).base_probs
    ids = [token["id"] for token in data["shown"]]
    assert ids == list(np.argsort(-base, kind="stable")[:25])
    assert [token["base"] for token in data["shown"]] == pytest.approx(base[ids].tolist(), rel=1e-12)
    assert [token["label"] for token in data["shown"]] == [show_token(token_text(i)) for i in ids]
    assert {token["label"] for token in data["shown"]} & {"</script><img src=x onerror=alert(1)>", "<b>bold</b>"}
    json.dumps(data)  # plain JSON all the way


def test_settings_and_knobs_go_both_ways(model_logits):
    settings = SamplingSettings(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1, seed=3)
    data = live_sampling_data(model_logits, [], settings, token_text, 10, KNOBS)
    assert data["settings"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05}
    assert list(data["knobs"]) == list(LIVE_KNOBS) and data["knobs"]["top_k"]["choices"] == [0, 1, 10, 40]
    assert data["stages"] == list(STAGES)
    sent = {"temperature": 1.25, "top_p": 0.5, "top_k": 10, "min_p": 0.0}
    back = live_settings(settings, sent)
    assert (back.temperature, back.top_p, back.top_k, back.min_p) == (1.25, 0.5, 10, 0.0)
    assert back.repetition_penalty == 1.1 and back.seed == 3 and isinstance(back.top_k, int)


@pytest.mark.parametrize("settings", [
    SamplingSettings(temperature=0.8, top_k=10, top_p=0.9, min_p=0.02, repetition_penalty=1.3),
    SamplingSettings(temperature=0.0),
])
def test_the_opening_chart_is_the_whole_transform_at_the_settings_sent(model_logits, settings):
    previous = [5, 17, 300]
    data = live_sampling_data(model_logits, previous, settings, token_text, 25, KNOBS)
    sampled = apply_sampling(model_logits, settings, previous)
    ids = [token["id"] for token in data["shown"]]
    assert data["opening"]["finals"] == sampled.final_probs[ids].tolist()
    assert data["opening"]["removed"] == sampled.removed_by[ids].tolist()
    assert (data["opening"]["kept"], data["opening"]["entropy"]) == (sampled.kept, sampled.entropy_bits)
    # Something was removed among the shown tokens, so a transform that ignored the settings would differ.
    assert any(stage >= 0 for stage in data["opening"]["removed"])


def test_tail_share_is_the_mass_a_top_n_cut_would_lose():
    logits = np.log(np.array([0.5, 0.25, 0.125, 0.125]))
    assert tail_share(logits, 2, 1.0) == pytest.approx(0.25)
    assert tail_share(logits, 4, 1.0) == 0.0
    assert tail_share(logits, 2, 2.0) > 0.25  # a higher temperature moves mass into the tail


def test_the_component_sets_text_never_markup():
    source = JS.read_text()
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", source)
    assert "fetch(" not in source and "http" not in source.replace("http://www.w3.org/2000/svg", "")
