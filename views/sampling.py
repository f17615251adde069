"""Sampling page: how temperature, top-p, top-k, min-p and repetition penalty reshape the distribution.

The sliders here are a what-if: they start from the sidebar's settings and recompute from the
logits the engine's prefill already has (apply_sampling on prefill.next_token.logits), never rerunning
the model. "Use these settings for the journey" copies them to the sidebar, which every page reads.
A second section adds the stages only the API applies (logit bias, presence and frequency
penalties, the grammar mask of response_format) and reports what each one moved or removed.
The what-if part lives in a fragment, so a slider step reruns only it, never the page or the model.
Temperature, top-k, top-p and min-p go further: their sliders and the headline chart are a component
(ui/live_sampling.py) that redoes those stages in the browser on every move, from the logits of the
whole vocabulary; the fragment reruns once a slider rests, so the numbers and charts below follow.
"""

from dataclasses import replace

import numpy as np
import streamlit as st

from charts.sampling import (
    cumulative_mass,
    drawn_from_figure,
    nucleus_figure,
    rank_labels,
    samples_figure,
    survivors_after_stages,
    survivors_figure,
    top_ids,
)
from charts.live_sampling import LIVE_KNOBS, live_sampling_data, live_settings, picture_only, tail_share
from lifecycle.errors import LifecycleError
from lifecycle.stages.sampling import (
    MAX_LOGIT_BIAS,
    SampledDistribution,
    SamplingSettings,
    apply_sampling,
    choose_tokens,
    entropy_bits,
    stage_effects,
)
from lifecycle.features.tools import output_rules
from lifecycle.lessons.sampling import api_stages_lesson, what_if_lesson
from lifecycle.stages.vocabulary import show_token
from ui.cache import prefilled_prompt
from ui.frame import lesson, loaded_model, stage_page
from ui.live_sampling import live_sampling_chart, live_settings_sent
from ui.settings import NUMBERS, JourneySettings
from ui.when_idle import details_ready, idle_told

KNOBS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
LOCAL = {knob: f"what_if_{knob}" for knob in KNOBS}
BASIS = "what_if_basis"
LIVE = "what_if_live"  # the live chart's key: its sliders are temperature, top-p, top-k and min-p
DETAILS = "what_if_details"  # ui.when_idle: the tabs under the live chart come in the run after it is drawn
TAIL_RANKS = 1000
TOP_K_CHOICES = (0, 1, 2, 3, 5, 10, 20, 40, 50, 100, 200, 500, 1000)
# Temperature rules of thumb (common practice, not law); the other knobs stay as they are.
PRESETS = {
    "Extraction, tools": 0.0,
    "Code": 0.1,
    "Retrieval Q&A": 0.2,
    "Creative writing": 0.9,
}
SPLIT_CHARACTER_NOTE = (
    "Tokens are written as on the Tokenization page: ␣ a space, ↵ a newline. A token like `<0xF0>` is one byte "
    "of a character (an emoji, a Chinese character) that the vocabulary splits across tokens; it is a real "
    "candidate, and the tokens after it complete the character."
)
SHOWN_TOKENS = 25
OPENING_TEMPERATURE = 1.0  # the model's own distribution, where the what-if opens after greedy decoding
DRAWN_TOKENS = 12
DRAW_COUNTS = (100, 1000, 5000)
NUCLEUS_RANKS = 2000


def _basis(settings: JourneySettings) -> tuple:
    return tuple(getattr(settings.sampling, knob) for knob in KNOBS)


def _opening(settings: JourneySettings, knob: str) -> float:
    """Where a what-if slider starts: the journey's setting, except that greedy decoding (temperature 0,
    one bar at 100%) opens at temperature 1, the model's own distribution, which has more to show."""
    value = getattr(settings.sampling, knob)
    return OPENING_TEMPERATURE if knob == "temperature" and value == 0 else value


def _start_from_sidebar(settings: JourneySettings) -> None:
    """(Re)initialise the what-if sliders when the sidebar settings changed or the page was left."""
    state = st.session_state
    if state.get(BASIS) != _basis(settings) or any(key not in state for key in LOCAL.values()):
        for knob, key in LOCAL.items():
            state[key] = _opening(settings, knob)
        state[BASIS] = _basis(settings)


def _differences(settings: JourneySettings, what_if: SamplingSettings) -> str:
    """How the what-if differs from the journey's settings, in words ("" when it does not)."""
    journey = settings.sampling
    changed = [f"{NUMBERS[knob].label.lower()} {getattr(what_if, knob):g} here, {getattr(journey, knob):g} in the "
               "journey" for knob in KNOBS if getattr(what_if, knob) != getattr(journey, knob)]
    if not changed:
        return "The sliders start at the journey's settings."
    greedy = " (greedy: it always takes the top token)" if journey.temperature == 0 else ""
    return f"Not the journey's settings: {'; '.join(changed)}{greedy}."


def _use_for_journey() -> None:
    # A callback runs before the sidebar widgets exist in the next run, so it may set their state.
    for knob, key in LOCAL.items():
        st.session_state[knob] = st.session_state[key]


def _preset(temperature: float) -> None:
    st.session_state[LOCAL["temperature"]] = temperature


def _from_browser() -> None:
    """The live chart's sliders came to rest: their settings become the what-if settings (what a
    browser sends is checked like any request's settings; anything out of range is ignored)."""
    values = live_settings_sent(LIVE)
    try:
        chosen = live_settings(SamplingSettings(), values or {})
        chosen.validate()
    except (KeyError, TypeError, ValueError, LifecycleError):
        return
    for knob in LIVE_KNOBS:
        st.session_state[LOCAL[knob]] = getattr(chosen, knob)


def _knob_specs(settings: JourneySettings) -> dict[str, dict]:
    specs = {}
    for knob in LIVE_KNOBS:
        spec = NUMBERS[knob]
        specs[knob] = {"label": spec.label, "low": spec.low, "high": spec.high, "step": spec.step, "help": spec.help}
    specs["top_k"]["choices"] = sorted({*TOP_K_CHOICES, settings.sampling.top_k})
    return specs


def _what_if_settings(settings: JourneySettings) -> SamplingSettings:
    values = {knob: st.session_state[LOCAL[knob]] for knob in KNOBS}
    return replace(settings.sampling, **values)


def _live_chart(settings: JourneySettings, logits: np.ndarray, previous, token_text):
    """The what-if sliders and the chart they redraw in the browser, a box for the lesson right under it, then
    the server-side repetition penalty; returns the what-if settings and the lesson's box."""
    _start_from_sidebar(settings)
    what_if = _what_if_settings(settings)
    st.caption(_differences(settings, what_if))  # above the chart: how this what-if differs from the journey
    data = live_sampling_data(logits, previous, what_if, token_text, SHOWN_TOKENS, _knob_specs(settings))
    live_sampling_chart(data if idle_told(DETAILS) else picture_only(data), LIVE, _from_browser)
    lesson_box = st.container()  # the lesson needs the settings after the repetition penalty's slider
    st.caption(f"What if you sampled differently? The model's top {SHOWN_TOKENS} tokens before and after sampling, "
               "redrawn in your browser as you move a slider from the logits the model already computed; the numbers "
               "follow when it rests. "
               "These sliders do not change the journey. " + SPLIT_CHARACTER_NOTE)
    if idle_told(DETAILS):  # a slider's code would hold back a new tab's chart: it comes with the details
        spec = NUMBERS["repetition_penalty"]
        st.slider(spec.label, spec.low, spec.high, step=spec.step, key=LOCAL["repetition_penalty"],
                  help=spec.help + " It runs on the server: it needs the prompt's tokens, so a move reruns this part.")
    tail = tail_share(logits, TAIL_RANKS, NUMBERS["temperature"].high)
    st.caption(
        f"Your browser has the logits of all {logits.size:,} tokens ({data['dtype']}), not just a top N: at "
        f"temperature {NUMBERS['temperature'].high:g} the tokens beyond the top {TAIL_RANKS:,} still hold "
        f"**{tail:.0%}** of the probability for this prompt, and top-p and the renormalization need every one. "
        "It redoes temperature, top-k, top-p and min-p as lifecycle.stages.sampling does; the repetition penalty "
        "(and the API's penalties below) stay on the server because they need the tokens already written."
    )
    return _what_if_settings(settings), lesson_box


def _presets() -> None:
    st.caption("Presets (temperature)")
    for column, (name, temperature) in zip(st.columns(len(PRESETS)), PRESETS.items()):
        column.button(f"{name}: {temperature:g}", on_click=_preset, args=(temperature,), width="stretch")
    if st.button("Use these settings for the journey", on_click=_use_for_journey, type="primary",
                 icon=":material/check:",
                 help="Copies them to the sidebar: every page and the generation use them, and the model runs again."):
        st.rerun(scope="app")  # inside the what-if fragment: the sidebar and the journey must run again too
    st.caption(
        "Presets set the temperature only. They are common rules of thumb, not laws: 0 for extraction "
        "and function calling, 0.1–0.3 for retrieval Q&A, 0–0.2 for code, 0.7–1.0 for creative writing. "
        "A higher temperature does not make a model creative; it only gives less likely tokens more chances. "
        "Here temperature 0 is exact greedy decoding; hosted APIs do not promise identical answers at 0."
    )


def _lesson(sampled: SampledDistribution, what_if: SamplingSettings, vocabulary: int) -> None:
    top = int(np.argmax(sampled.base_probs))
    lesson(  # inline: it sits in the what-if fragment, which reruns without the rest of the page
        what_if_lesson(float(sampled.base_probs[top]), entropy_bits(sampled.base_probs), sampled.greedy, what_if,
                       sampled.kept, vocabulary, float(sampled.final_probs[top]), sampled.entropy_bits),
        inline=True,
    )


def _metrics(sampled: SampledDistribution, vocabulary: int) -> None:
    before, after, survivors, removed = st.columns(4)
    before.metric("Entropy before", f"{entropy_bits(sampled.base_probs):.2f} bits")
    after.metric("Entropy after", f"{sampled.entropy_bits:.2f} bits")
    survivors.metric("Tokens that survive", f"{sampled.kept:,}")
    removed.metric("Tokens removed", f"{vocabulary - sampled.kept:,}")


def _nucleus(logits: np.ndarray, what_if: SamplingSettings, previous, sampled: SampledDistribution) -> None:
    if sampled.greedy:
        st.info("At temperature 0 decoding is greedy: the top token is taken and top-p has nothing to cut.")
        return
    # Top-p sees the distribution left after temperature and top-k, renormalized.
    before_top_p = apply_sampling(logits, replace(what_if, top_p=1.0, min_p=0.0), previous).final_probs
    nucleus = sampled.kept + sampled.removed_count("min_p") if what_if.top_p < 1 else None
    ranks = min(int(np.count_nonzero(before_top_p)), max(100, 3 * (nucleus or 0)), NUCLEUS_RANKS)
    figure = nucleus_figure(cumulative_mass(before_top_p, ranks), what_if.top_p, nucleus)
    st.plotly_chart(figure, key="nucleus", theme=None)
    if nucleus is None:
        st.caption(f"top_p = 1: top-p is off. The curve shows the {ranks:,} most likely tokens.")
    else:
        st.caption(
            f"Top-p keeps the smallest set of most likely tokens whose probabilities add up to at least "
            f"{what_if.top_p:g}: here **{nucleus:,}** token{'s' * (nucleus != 1)}. Curve cut at the {ranks:,} most likely tokens."
        )


def _draws(sampled: SampledDistribution, token_text, seed: int) -> None:
    draws = st.segmented_control("Draws", DRAW_COUNTS, default=1000, key="what_if_draws",
                                 format_func=lambda n: f"{n:,}") or 1000
    rng = np.random.default_rng(seed)
    counts = np.bincount(choose_tokens(sampled, rng, draws), minlength=sampled.final_probs.size)
    ids = top_ids(sampled.final_probs, DRAWN_TOKENS)
    ids = ids[sampled.final_probs[ids] > 0]
    labels = rank_labels(ids, token_text)
    expected = list(sampled.final_probs[ids])
    observed = list(counts[ids] / draws)
    rest_expected, rest_observed = 1 - sum(expected), 1 - sum(observed)
    if rest_expected > 1e-9 or rest_observed > 0:
        labels.append("all other tokens")
        expected.append(max(rest_expected, 0.0))
        observed.append(rest_observed)
    st.plotly_chart(samples_figure(labels, expected, observed, draws), key="draws", theme=None)
    distinct = int(np.count_nonzero(counts))
    st.caption(
        f"{draws:,} real draws with choose_tokens (the generation loop's choose_token, {draws:,} at once), seeded with "
        f"{seed}: **{distinct:,}** different token{'s' * (distinct != 1)} came up. With more draws the shares close in on the "
        "probabilities; that gap is just chance."
    )


STAGE_NAMES = {
    "grammar": "grammar mask (response_format)", "logit_bias": "logit bias", "presence_penalty": "presence penalty",
    "frequency_penalty": "frequency penalty", "repetition_penalty": "repetition penalty", "temperature": "temperature",
    "top_k": "top-k", "top_p": "top-p", "min_p": "min-p",
}
BIAS_CHOICES = 10


@st.cache_resource(show_spinner=False)
def _json_object_mask(_loaded, name: str) -> np.ndarray:
    """The first step's mask under response_format json_object (the same for every prompt)."""
    return output_rules({"type": "json_object"}).constraint(_loaded).allowed()


def _effect_text(effect) -> str:
    if effect.moved:
        return f"moved {effect.moved:,} logit{'s' * (effect.moved != 1)} (by up to {effect.largest:.2f})"
    if effect.removed:
        return f"removed {effect.removed:,} token{'s' * (effect.removed != 1)}"
    return "nothing"


def _api_stages(logits, what_if: SamplingSettings, previous, token_text, vocabulary: int) -> None:
    biasable = top_ids(np.exp(logits - logits.max()), BIAS_CHOICES)
    token_col, bias_col, presence_col, frequency_col = st.columns(4)
    token = token_col.selectbox("logit_bias token", [int(i) for i in biasable], key="api_bias_token",
                                format_func=lambda i: f"{show_token(token_text(i))} (id {i})")
    bias = bias_col.slider("logit_bias value", -MAX_LOGIT_BIAS, MAX_LOGIT_BIAS, 0.0, step=1.0, key="api_bias")
    presence = presence_col.slider("presence_penalty", -2.0, 2.0, 0.0, step=0.1, key="api_presence")
    frequency = frequency_col.slider("frequency_penalty", -2.0, 2.0, 0.0, step=0.1, key="api_frequency")
    grammar = st.toggle('response_format: {"type": "json_object"} (grammar mask)', key="api_grammar")
    loaded = loaded_model()
    allowed = _json_object_mask(loaded, loaded.name) if grammar else None
    api = replace(what_if, presence_penalty=presence, frequency_penalty=frequency,
                  logit_bias=((token, bias),) if bias else ())
    sampled = apply_sampling(logits, api, previous, previous, allowed)
    effects = stage_effects(sampled)
    rows = [{"Stage": STAGE_NAMES[e.stage], "What it did": _effect_text(e), "Tokens in play": e.remaining}
            for e in effects]
    st.dataframe(rows, hide_index=True, width="stretch")
    grammar_effect = effects[0]
    lesson(api_stages_lesson(grammar, grammar_effect.removed, grammar_effect.remaining, vocabulary, sampled.kept))
    st.caption(
        "OpenAI counts presence and frequency penalties over the answer so far; at the answer's first token "
        "that is empty, so here they count the prompt's tokens to show what they do later in the answer."
    )
    st.plotly_chart(survivors_figure(survivors_after_stages(sampled)), key="api_survivors", theme=None)
    st.plotly_chart(drawn_from_figure(sampled, token_text), key="api_drawn_from", theme=None)


@st.fragment
def _what_if(settings: JourneySettings, logits: np.ndarray, previous, token_text) -> None:
    """Everything the what-if sliders change; a slider step reruns only this part, never the page or the model."""
    vocabulary = int(logits.size)
    what_if, lesson_box = _live_chart(settings, logits, previous, token_text)
    sampled = apply_sampling(logits, what_if, previous)
    with lesson_box:
        _lesson(sampled, what_if, vocabulary)
    if not details_ready(DETAILS):
        return  # the tabs come in the fragment's run after the live chart is drawn
    stages, nucleus, draws, api = st.tabs(["What each stage removed", "The nucleus (top-p)", "Draw N samples",
                                           "The stages the API adds"])
    with stages:
        _metrics(sampled, vocabulary)
        st.caption(
            "The model (T = 1): its own probabilities (softmax at temperature 1), grey where a stage removed the "
            "token. After sampling: the probabilities the next token is actually drawn from, renormalized over "
            "the survivors. Stages run in order: grammar mask, logit bias, presence and frequency penalties, "
            "repetition penalty, temperature, top-k, top-p, min-p; "
            "a token is named after the first stage that removed it."
        )
        st.plotly_chart(survivors_figure(survivors_after_stages(sampled)), key="survivors", theme=None)
        _presets()
    with nucleus:
        _nucleus(logits, what_if, previous, sampled)
    with draws:
        _draws(sampled, token_text, settings.sampling.seed)
    with api:
        _api_stages(logits, what_if, previous, token_text, vocabulary)


def render() -> None:
    with stage_page("sampling") as settings:
        prepared, prefill = prefilled_prompt(settings)
        _what_if(settings, prefill.next_token.logits, prepared.rendered.ids, prefill.next_token.token_text)
