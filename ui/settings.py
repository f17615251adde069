"""The settings every page shares: one prompt, its conversation and the sampling parameters.

They are set once in the sidebar (rendered by app.py before the page runs, so the widgets live
across page switches) and carried in the URL: each widget is bound to a query parameter named
after its key, so ``/tokenization?prompt=Hi&temperature=0`` reopens that page with that prompt.
Streamlit drops a URL value it cannot accept (wrong type, out of range) and uses the default;
``url_problems`` says so on the page instead of failing silently.

A new tab's first run draws no widgets (their code held its picture back, measured in
docs/benchmark-history.md): ``current_settings`` then reads the URL as the widgets will (``url_settings``), and
the widgets come in the run after the picture is drawn (ui.frame).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import streamlit as st

from lifecycle.errors import LifecycleError
from lifecycle.journey import MAX_PROMPT_CHARS, JourneyInput
from lifecycle.stages.sampling import SamplingSettings

_LINK_SETTINGS = "link_settings"  # a new tab's link, until its widgets are drawn (keep_link_settings)
# The walkthrough's question. At the default temperature 0 (greedy) SmolLM2-135M answers "The capital
# of India is New Delhi, …" in 24 tokens, finish_reason "stop" (checked in tests/pages/test_defaults.py).
DEFAULT_PROMPT = "What's the capital of India?"
# A wrong answer to the default question, measured on the real model (tests/pages/test_defaults.py
# re-runs it): at this temperature and seed the draw after "The capital of India is" picks " Kolk",
# the third most likely token (probabilities after temperature).
WRONG_DRAW = {"temperature": 0.7, "seed": 42, "answer": "The capital of India is Kolkata.",
              "odds": ((" New", 0.434), (" Mumbai", 0.406), (" Kolk", 0.092))}


@dataclass(frozen=True)
class NumberSpec:
    """A numeric setting: its widget's range and step. ``slider`` False means a number box."""

    label: str
    low: float
    high: float
    default: float
    step: float
    slider: bool
    help: str


NUMBERS: dict[str, NumberSpec] = {
    "temperature": NumberSpec("Temperature", 0.0, 2.0, 0.0, 0.05, True,
                              "0 = greedy: always the most likely token. Changing it re-runs the model "
                              "for every page (the Sampling page's own sliders do not)."),
    "top_p": NumberSpec("Top-p", 0.01, 1.0, 1.0, 0.01, True,
                        "Keep the smallest set of tokens whose probabilities add up to p (1 = off)."),
    "top_k": NumberSpec("Top-k", 0, 1000, 0, 1, False, "Keep only the k most likely tokens (0 = off)."),
    "min_p": NumberSpec("Min-p", 0.0, 1.0, 0.0, 0.01, True,
                        "Drop tokens less likely than min-p times the top token's probability (0 = off)."),
    "repetition_penalty": NumberSpec("Repetition penalty", 0.5, 2.0, 1.0, 0.05, True,
                                     "Above 1 makes tokens already in the text less likely (1 = off)."),
    "max_tokens": NumberSpec("Max tokens", 1, 1024, 48, 1, False,
                             "The answer stops here with finish_reason \"length\"."),
    "seed": NumberSpec("Seed", 0, 2**31 - 1, 42, 1, False, "Same seed + same settings = same answer."),
}
INTEGERS = frozenset({"top_k", "max_tokens", "seed"})
# The sidebar's sampling widgets: each sets the field of SamplingSettings it is named after.
SAMPLING_KEYS = tuple(key for key in NUMBERS if key in {f.name for f in fields(SamplingSettings)})


def widget_default(key: str) -> int | float:
    """A number widget's default, as the widget holds it (an int for the whole-number settings)."""
    return (int if key in INTEGERS else float)(NUMBERS[key].default)


# The pages' sampling: each widget's default; the settings without a widget keep the API's defaults.
PAGE_SAMPLING = SamplingSettings(**{key: widget_default(key) for key in SAMPLING_KEYS})


@dataclass(frozen=True)
class JourneySettings:
    """One request's inputs as the pages share them. Hashable, so it can key a cache."""

    prompt: str = DEFAULT_PROMPT
    system_prompt: str = ""
    history: tuple[tuple[str, str], ...] = ()  # earlier (role, content) turns, oldest first
    sampling: SamplingSettings = PAGE_SAMPLING
    max_tokens: int = widget_default("max_tokens")
    include_usage: bool = True

    @classmethod
    def from_sidebar(cls, **values: object) -> JourneySettings:
        """The settings named as the sidebar's widgets and the URL's query parameters name them
        (``temperature``, ``top_k``... are the sampling's); a setting not given keeps its default."""
        sampling = {key: values.pop(key) for key in SAMPLING_KEYS if key in values}
        return cls(**values, sampling=replace(PAGE_SAMPLING, **sampling))

    def messages(self) -> list[dict]:
        """The OpenAI messages list: system prompt (when set), earlier turns, then the prompt."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt.strip() else []
        turns = [{"role": role, "content": content} for role, content in self.history]
        return [*system, *turns, {"role": "user", "content": self.prompt}]

    def journey_input(self) -> JourneyInput:
        """These settings as the input of ``lifecycle.journey.run_journey``."""
        return JourneyInput(
            prompt=self.prompt,
            system=self.system_prompt if self.system_prompt.strip() else None,
            history=self.history,
            sampling=self.sampling,
            max_tokens=self.max_tokens,
            include_usage=self.include_usage,
        )


def page_journey_input(settings: Mapping[str, object], prompt: str) -> JourneyInput:
    """The journey input a page builds for ``prompt`` under ``settings`` (the sidebar's names, the
    others at their defaults): what the warm route computes, so a warmed prompt is the page's own."""
    return JourneySettings.from_sidebar(**settings, prompt=prompt).journey_input()


_TURN_START = re.compile(r"^\s*(user|assistant)\s*:\s?(.*)$", re.IGNORECASE)


def parse_history(text: str) -> tuple[tuple[str, str], ...]:
    """Earlier turns written as lines starting ``user:`` or ``assistant:``; other lines continue a turn."""
    turns: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _TURN_START.match(line)
        if match:
            turns.append((match.group(1).lower(), [match.group(2)]))
        elif turns:
            turns[-1][1].append(line)
        elif line.strip():
            raise LifecycleError(
                f"Conversation history line {number} must start with 'user:' or 'assistant:'.",
                param="history",
            )
    return tuple((role, "\n".join(lines).strip()) for role, lines in turns)


def url_number(key: str, raw: str) -> int | float | None:
    """The number a link's ``key=raw`` gives its widget, or None when the widget cannot take it (Streamlit then
    uses the default): not a number, not finite, out of the widget's range, or not whole for a whole-number one."""
    spec = NUMBERS[key]
    try:
        value = float(raw)
    except ValueError:
        return None
    whole = key not in INTEGERS or value.is_integer()
    if not (math.isfinite(value) and spec.low <= value <= spec.high and whole):
        return None
    return int(value) if key in INTEGERS else value


def url_problems(params: Mapping[str, str]) -> list[str]:
    """Messages for URL values the sidebar cannot use (Streamlit silently falls back to the default)."""
    problems = []
    for key, spec in NUMBERS.items():
        raw = params.get(key)
        if raw is not None and url_number(key, raw) is None:
            kind = "an integer" if key in INTEGERS else "a number"
            problems.append(
                f"The link set {key}={raw[:40]!r}, but {key} must be {kind} from {spec.low:g} to "
                f"{spec.high:g}; using {spec.default:g}."
            )
    if len(params.get("prompt", "")) > MAX_PROMPT_CHARS:
        problems.append(f"The link's prompt is longer than {MAX_PROMPT_CHARS:,} characters; it was cut there.")
    return problems


def url_settings(params: Mapping[str, str]) -> dict[str, object]:
    """Each sidebar widget's value as the widget takes it from a link's query ``params``: a value it cannot take
    (see ``url_number``; a checkbox reads true or false) leaves the default, and the prompt is cut at its limit."""
    values = bound_defaults()
    for key, raw in params.items():
        if key in NUMBERS:
            number = url_number(key, raw)
            values[key] = values[key] if number is None else number
        elif key == "include_usage" and raw.lower() in {"true", "false"}:
            values[key] = raw.lower() == "true"
        elif key in {"prompt", "system_prompt", "history"}:
            values[key] = raw[:MAX_PROMPT_CHARS] if key == "prompt" else raw
    return values


def bound_defaults() -> dict[str, object]:
    """Each sidebar widget's key (its query parameter) and default value; a default is never in the URL."""
    numbers = {key: widget_default(key) for key in NUMBERS}
    return {"prompt": DEFAULT_PROMPT, "system_prompt": "", "history": "", **numbers, "include_usage": True}


def keep_link_settings() -> None:
    """Keep the settings of the link a new tab opened with, for the run that first draws the widgets: a page switch
    before then (a click, presenter mode's arrow keys) drops every URL parameter no widget is bound to yet."""
    link = st.query_params.to_dict()
    st.session_state[_LINK_SETTINGS] = {key: link[key] for key in bound_defaults() if key in link}


def restore_lost_query() -> None:
    """Put back into the URL any setting the session holds but the URL lost on a page switch.

    Streamlit's frontend carries bound parameters across a sidebar page switch, but under load it
    sometimes sends the new page's run without them (seen in the browser suite: the widgets kept the
    prompt, the URL stayed bare), and it drops them when the switch comes before the widgets were
    first drawn (the link's settings, ``keep_link_settings``). Streamlit writes a bound widget's value
    back to the URL when it was set through ``st.session_state`` before the widget is drawn, so a value
    missing from the URL is set again, unchanged; a link's value goes back into the URL as the link wrote
    it, and into the widget as the widget takes it. Must run before the widgets are created."""
    state, query = st.session_state, st.query_params
    link = state.pop(_LINK_SETTINGS, {})
    for key, default in bound_defaults().items():
        if key in query:
            continue
        if key in state and state[key] != default:
            state[key] = state[key]
        elif key not in state and key in link:
            value = url_settings({key: link[key]})[key]
            if value != default:
                query[key], state[key] = link[key], value


def render_settings_sidebar() -> None:
    """The shared settings widgets, each bound to the URL query parameter named like its key."""
    restore_lost_query()
    sidebar = st.sidebar
    sidebar.text_area(
        "Prompt",
        DEFAULT_PROMPT,
        key="prompt",
        bind="query-params",
        max_chars=MAX_PROMPT_CHARS,
        height=110,
        help="The user message this whole app follows. Press Ctrl+Enter or click outside to apply.",
    )
    with sidebar.expander("Conversation"):
        st.text_area(
            "System prompt",
            "",
            key="system_prompt",
            bind="query-params",
            help="Empty: the model's chat template inserts its own default system prompt.",
        )
        st.text_area(
            "Earlier turns",
            "",
            key="history",
            bind="query-params",
            placeholder="user: Hi!\nassistant: Hello! How can I help?",
            help="One turn per 'user:' or 'assistant:' line; the API resends all of them every call.",
        )
    with sidebar.expander("Sampling and output", expanded=True):
        st.caption("These are the journey's settings: changing one runs the model again for every page. "
                   "The Sampling page's own sliders are a what-if and change nothing here.")
        for key, spec in NUMBERS.items():
            _number_widget(key, spec)
        st.checkbox(
            "Stream usage chunk",
            True,
            key="include_usage",
            bind="query-params",
            help='stream_options: {"include_usage": true} adds a last chunk with token counts.',
        )


def _number_widget(key: str, spec: NumberSpec) -> None:
    cast = int if key in INTEGERS else float
    arguments = dict(key=key, bind="query-params", help=spec.help)
    low, high, default, step = (cast(v) for v in (spec.low, spec.high, spec.default, spec.step))
    if spec.slider:
        st.slider(spec.label, low, high, default, step, **arguments)
    else:
        st.number_input(spec.label, low, high, default, step, **arguments)


def settings_drawn() -> bool:
    """Whether this session has drawn the sidebar's settings widgets (each keeps its value in the session)."""
    return any(key in st.session_state for key in bound_defaults())


def current_settings() -> JourneySettings:
    """The settings of this session: the sidebar widgets' values, or before they are drawn (a new tab's first
    run) the link's, as the widgets will take them.

    Raises LifecycleError when the conversation history cannot be read.
    """
    state = st.session_state
    if settings_drawn():
        values = {key: state[key] for key in bound_defaults() if key in state}
    else:
        values = url_settings(st.query_params.to_dict())
    history = parse_history(str(values.pop("history", "") or ""))
    return JourneySettings.from_sidebar(**values, history=history)
