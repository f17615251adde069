"""Home: the journey map. Every stage of this prompt's call, timed, grouped by phase, with a link into each page."""

import streamlit as st

from charts.journey import latency_waterfall
from lifecycle.features.call_timeline import LAST_FRAMES, SETUP, WAIT
from lifecycle.errors import LifecycleError
from lifecycle.lessons.home import engine_wait_sentence, home_lesson
from lifecycle.lessons.words import counted
from lifecycle.stages.vocabulary import show_token
from lifecycle.model import ModelLoadError
from ui.cache import cached_journey
from ui.frame import (APP_TITLE, PRESENT, empty_prompt_message, input_error, lesson, loaded_model, presenting,
                      show_prompt, stage_link, streamlit_page)
from ui.settings import DEFAULT_PROMPT, WRONG_DRAW, current_settings
from ui.stages import HOME, PHASES, STAGES
from ui.text import literal, ms
from ui.when_idle import details_ready

DECODE_BARS = 24  # decode steps drawn one by one; the rest are folded into one bar
DETAILS = "home_details"  # ui.when_idle: the latency waterfall (Plotly) comes once the map is drawn


def _phase(stage: str) -> str:
    if stage == WAIT:
        return "Waiting for the engine"
    if stage == SETUP:
        return "The client and the API"
    if stage.startswith("decode") or stage == LAST_FRAMES:
        return "Back to the client"
    return "Inside the model"


def journey_bars(spans) -> tuple[list[tuple[str, float]], list[str], int]:
    """(label, seconds) bars of the call in order, their phases, and how many decode steps were folded into one bar."""
    shown = [t for t in spans if not (t.stage.startswith("decode ") and int(t.stage.split()[1]) > DECODE_BARS)]
    folded = [t.seconds for t in spans if t not in shown]
    bars = [(t.stage, t.seconds) for t in shown]
    phases = [_phase(t.stage) for t in shown]
    if folded:
        at = max(i for i, t in enumerate(shown) if t.stage.startswith("decode ")) + 1
        bars.insert(at, (f"decode {DECODE_BARS + 1}–{DECODE_BARS + len(folded)}", sum(folded)))
        phases.insert(at, "Back to the client")
    return bars, phases, len(folded)


def stage_lines(journey, model) -> dict[str, str]:
    """One line per page with this run's own figure."""
    time = {t.stage: t.seconds for t in journey.timings}
    generation, metrics = journey.generation, journey.stream_metrics
    steps = len(generation.steps)
    mean_step = generation.decode_seconds / steps if steps else 0.0
    top = journey.next_token.top(1)[0]
    prompt_ids = len(journey.rendered.ids)
    usage_note = "with a usage chunk" if journey.input.include_usage else "no usage chunk"
    return {
        "request": f"{counted(len(journey.request.messages), 'message')}, stream=true, "
                   f"max_tokens={journey.input.max_tokens}; built in {ms(time['request'])}",
        "gateway": "Key check, rate limit, routing and call log: not part of this timed run (see the page)",
        "tokenization": f"{journey.prompt_tokens.count:,} tokens in {ms(time['tokenization'])}",
        "context-window": f"Chat template: {prompt_ids:,} tokens in all ({prompt_ids - journey.prompt_tokens.count:,} "
                          f"added by the template) of {journey.budget.window:,}; {ms(time['chat template'])}",
        "embeddings": f"{prompt_ids:,} vectors of {journey.forward.embeddings.shape[-1]} numbers",
        "attention": f"{model.num_layers} layers × {model.num_heads} heads; inspection pass "
                     f"{ms(time['inspection pass'])} (an extra pass this app runs for these views)",
        "next-token": f"Top guess {literal(show_token(top.text))} at {top.probability:.1%} of {model.vocab_size:,} tokens",
        "sampling": f"{journey.sampled.kept:,} of {model.vocab_size:,} tokens left in play after sampling",
        "generation": f"Prefill: {prompt_ids:,} tokens in {ms(generation.prefill_seconds)}. Decode: {steps:,} tokens, "
                      f"{ms(mean_step)} each on average ({generation.finish_reason})",
        "streaming": f"{len(journey.stream)} SSE events ({usage_note}), TTFT {ms(metrics.ttft)}, "
                     f"{metrics.tokens_per_second:,.1f} tokens/s",
        "detokenization": f"{steps} tokens → {len(generation.text):,} characters in {ms(time['detokenization'])}",
    }


def _lesson(journey) -> None:
    time = {t.stage: t.seconds for t in journey.timings}
    model_time = journey.generation.prefill_seconds + journey.generation.decode_seconds
    lesson(home_lesson(journey.call[-1].end, time["tokenization"], time["detokenization"], len(journey.rendered.ids),
                       len(journey.generation.steps), model_time, time["inspection pass"]))


def _small_model_note(model) -> None:
    """Once and plainly: the model is tiny and often wrong, and a wrong answer of its own as the lesson."""
    odds = ", ".join(f"{literal(show_token(text))} {p:.1%}" for text, p in WRONG_DRAW["odds"])
    st.info(
        f"**This is a very small model**: {model.name}, {model.parameter_count / 1e6:,.0f} million parameters, "
        "small enough for this CPU, and often wrong; the walkthrough's shorter answer came from a far bigger "
        "hosted model. At the default temperature 0 it always takes "
        "the most likely token and answers New Delhi; at temperature "
        f"{WRONG_DRAW['temperature']:g} with seed {WRONG_DRAW['seed']} it says \"{WRONG_DRAW['answer']}\" "
        f"After \"The capital of India is\" its odds at temperature {WRONG_DRAW['temperature']:g} were {odds}: the "
        "seeded draw landed on the third "
        "choice. Sampling gives unlikely tokens a chance, and sometimes they win.",
        icon=":material/info:",
    )
    st.page_link(streamlit_page(HOME), label="Replay the wrong answer", icon=":material/replay:",
                 query_params={"prompt": DEFAULT_PROMPT, "temperature": WRONG_DRAW["temperature"],
                               "seed": WRONG_DRAW["seed"], **({PRESENT: "true"} if presenting() else {})})


def render() -> None:
    st.title(APP_TITLE, anchor=False)
    journey = model = None
    try:
        settings = current_settings()
        show_prompt(settings.prompt)
        if settings.prompt.strip():
            model = loaded_model()
            journey = cached_journey(settings)
        else:
            empty_prompt_message()
    except (LifecycleError, ModelLoadError) as error:
        input_error(error)

    if journey is not None:
        _lesson(journey)
        st.markdown(engine_wait_sentence(journey.waited_seconds, journey.ahead, journey.jobs_ahead))
        st.caption(
            f"Model: {model.name}, {model.num_layers} layers, {model.num_heads} attention heads, "
            f"{model.vocab_size:,} tokens in its vocabulary, a context window of {model.context_window:,} "
            f"tokens; loaded in {model.load_seconds:.1f} s on CPU."
        )

    lines = stage_lines(journey, model) if journey is not None else {}
    phases = list(PHASES.items())
    # The journey's three phases side by side, then the class's and the caller's own pages: five columns
    # leave a 1024 px projector with the sidebar open ~100 px a column, too narrow for a stage's name.
    for row in (phases[:3], phases[3:]):
        for column, (phase, pages) in zip(st.columns(len(row), border=True), row):
            with column:
                st.subheader(phase, anchor=False)
                for page in pages:
                    st.page_link(streamlit_page(page), label=page.title, icon=page.icon)
                    st.caption(lines.get(page.url_path, page.summary))

    if journey is not None:
        _small_model_note(model)  # after the map, so the map is the first screen on a projector
        st.subheader("Where the latency lives", anchor=False)
        if details_ready(DETAILS):
            _waterfall(journey)

    stage_link(STAGES[0], f"Next: {STAGES[0].title}", ":material/arrow_forward:")


def _waterfall(journey) -> None:
    """The call's latency, bar after bar on the stream's clock."""
    bars, phases, folded = journey_bars(journey.call)
    st.plotly_chart(latency_waterfall(bars, phases), key="waterfall", theme=None)
    if folded:
        st.caption(f"Decode steps {DECODE_BARS + 1}–{DECODE_BARS + folded} ({folded} steps) are drawn as one bar.")
    st.caption(
        f"Each bar starts where the previous one ended, on the stream's clock: from the server asking the engine for "
        f"the prompt to the last event at {ms(journey.call[-1].end)}, the last \"At\" on the Streaming page. Decode 1 "
        "only samples from the prefill's logits; every later step runs the model on one new token. The request, "
        "tokenization and chat template ran before this clock started; the gateway runs no model and is not timed "
        "here; the app's inspection pass is not part of the call and is not drawn."
    )
