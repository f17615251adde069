"""Generation page: the generation loop one token at a time, with alternatives and the finish reason.

The journey's real generation is revealed step by step ("Next token", "Run to the end"). Picking
an alternative at a step reruns the loop with that step forced to it and the steps before it
forced to the tokens already shown (lifecycle.generate.generate(forced=...)), cached per branch.
"""

import pandas as pd
import streamlit as st

from charts.generation import alternatives_figure, steps_figure
from charts.logprobs import steps_logprob_figure
from lifecycle.generate import Generation, GenerationStep
from lifecycle.vocabulary import show_token
from ui.cache import answered_prompt, journey_results
from ui.frame import lesson, show_text, stage_page
from ui.settings import NUMBERS, JourneySettings
from ui.tables import fitted_table

VIEW = "generation_view"  # session state: which run is shown, how far, and where the reader picked
SHORT_RUN = 5
TABLE_ROWS = 200


def _view(settings: JourneySettings) -> dict:
    """This session's view of the loop, reset whenever the settings (hence the journey) change."""
    view = st.session_state.get(VIEW)
    if view is None or view["settings"] != settings:
        view = {"settings": settings, "forced": (), "picked": (), "revealed": 1}
        st.session_state[VIEW] = view
    return view


def _reveal(count: int) -> None:
    st.session_state[VIEW]["revealed"] = count


def _pick(generation: Generation, index: int, token_id: int) -> None:
    view = st.session_state[VIEW]
    view["forced"] = (*((i, s.token_id) for i, s in enumerate(generation.steps[:index])), (index, token_id))
    view["picked"] = (*(p for p in view["picked"] if p < index), index)
    view["revealed"] = index + 1


def _back_to_original() -> None:
    st.session_state[VIEW].update(forced=(), picked=(), revealed=1)


def _set_max_tokens(value: int) -> None:
    st.session_state["max_tokens"] = value  # a callback may set the sidebar widget's state


def _how_chosen(step: GenerationStep, picked, greedy: bool) -> str:
    if step.index in picked:
        return "you picked"
    if step.forced:
        return "replayed"
    return "greedy (top token)" if greedy else "sampled"


def _table(steps: list[GenerationStep], picked, greedy: bool) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Step": [s.index + 1 for s in steps],
            "Token": [show_token(s.text) for s in steps],
            "Id": [s.token_id for s in steps],
            "Probability": [f"{s.probability:.1%}" for s in steps],
            "Model's probability (T=1)": [f"{s.base_probability:.1%}" for s in steps],
            "Time (ms)": [round(s.seconds * 1000, 1) for s in steps],
            "How chosen": [_how_chosen(s, picked, greedy) for s in steps],
            "Top 5 alternatives": [" · ".join(f"{show_token(c.text)} {c.probability:.0%}" for c in s.alternatives) for s in steps],
        }
    )


def _lesson(generation: Generation, prompt_tokens: int, max_tokens: int) -> None:
    steps = generation.steps
    mean_ms = 1000 * generation.decode_seconds / len(steps)
    why = {
        "stop": "it chose an end-of-sequence token (finish_reason **stop**)",
        "length": f"it reached max_tokens = {max_tokens} (finish_reason **length**)",
    }.get(generation.finish_reason, f"finish_reason **{generation.finish_reason}**")
    lesson(
        f"The model does not write the answer at once: it produced **{len(steps)} tokens, one per step**. "
        f"First the **{prompt_tokens} prompt tokens** ran through the model in one pass (the prefill, "
        f"{1000 * generation.prefill_seconds:.0f} ms), filling the key/value cache; then each step fed only "
        f"the newest token back in, took the next-token distribution, sampled one token and appended it "
        f"({mean_ms:.0f} ms per step on average). It stopped because {why}."
    )


def _controls(total: int, revealed: int, branched: bool) -> None:
    columns = st.columns(4)
    columns[0].button("Next token", on_click=_reveal, args=(revealed + 1,), disabled=revealed >= total,
                      icon=":material/skip_next:", type="primary", width="stretch")
    columns[1].button("Run to the end", on_click=_reveal, args=(total,), disabled=revealed >= total,
                      icon=":material/fast_forward:", width="stretch")
    columns[2].button("Start over", on_click=_reveal, args=(1,), disabled=revealed <= 1,
                      icon=":material/first_page:", width="stretch")
    columns[3].button("Back to the original run", on_click=_back_to_original, disabled=not branched,
                      icon=":material/undo:", width="stretch")


def _step_detail(generation: Generation, revealed: int, picked, greedy: bool) -> None:
    shown = generation.steps[:revealed]
    chosen = st.selectbox("Look at step", [s.index for s in shown], index=len(shown) - 1,
                          format_func=lambda i: f"{i + 1}: {show_token(shown[i].text)}", key=f"generation_step_{revealed}")  # a new reveal shows the newest step
    step = shown[chosen]
    left, right = st.columns([3, 2])
    with left:
        st.plotly_chart(alternatives_figure(step), key="alternatives", theme=None)
    with right:
        st.markdown(f"**Step {step.index + 1}**, {_how_chosen(step, picked, greedy)}: the chosen token")
        st.code(show_token(step.text), language=None)
        st.caption(f"id {step.token_id}, probability {step.probability:.1%} after sampling "
                   f"({step.base_probability:.1%} in the model's own distribution), {1000 * step.seconds:.1f} ms.")
        others = [c for c in step.alternatives if c.id != step.token_id]
        if others:
            alternative = st.radio("Continue from an alternative instead", others, key=f"generation_alternative_{step.index}",
                                   format_func=lambda c: f"{show_token(c.text)} ({c.probability:.1%})")
            st.button("Continue from here", on_click=_pick, args=(generation, step.index, alternative.id),
                      icon=":material/call_split:")
            st.caption("Reruns the loop with the steps before this one kept and this token forced here.")
    if greedy:
        st.caption("At temperature 0 only the top token can be chosen, so the others show 0%; they are the "
                   "model's next most likely tokens.")


def _finish(generation: Generation, settings: JourneySettings) -> None:
    st.subheader("Why it stopped", anchor=False)
    last = generation.steps[-1]
    if generation.finish_reason == "length":
        st.warning(f"finish_reason: **length**. The loop hit max_tokens = {settings.max_tokens} and was cut off "
                   "mid-answer, whatever the model wanted to say next.", icon=":material/content_cut:")
    elif generation.finish_reason == "stop":
        st.success(f"finish_reason: **stop**. Step {last.index + 1} chose an end-of-sequence token (id "
                   f"{last.token_id}, the model's end of turn); the loop stops there and leaves it out of the text.",
                   icon=":material/check_circle:")
    else:
        st.info(f"finish_reason: **{generation.finish_reason}**")
    if settings.max_tokens != SHORT_RUN:
        st.button(f"Try max_tokens = {SHORT_RUN}", on_click=_set_max_tokens, args=(SHORT_RUN,),
                  help="Sets max_tokens in the sidebar: the answer is cut with finish_reason \"length\".")
    else:
        default = int(NUMBERS["max_tokens"].default)
        st.button(f"Back to max_tokens = {default}", on_click=_set_max_tokens, args=(default,))


def _logprobs(steps: list[GenerationStep]) -> None:
    with st.expander("Log-probabilities on the answer (what the API's logprobs return)", expanded=True):
        st.plotly_chart(steps_logprob_figure(steps), key="generation_logprobs", theme=None)
        lowest = min(steps, key=lambda step: step.logprob)
        st.caption(
            f"Each token coloured by the model's own probability for it (before sampling). The least likely "
            f"token here had logprob {lowest.logprob:.2f} (p = {lowest.base_probability:.1%}) at step "
            f"{lowest.index + 1}. Hover a token for its top alternatives."
        )


with stage_page("generation") as settings:
    prepared, answer = answered_prompt(settings)
    view = _view(settings)
    inp = prepared.input
    if view["forced"]:
        with st.spinner("Generating the branch on the model…", show_time=True):
            generation = journey_results().branch(tuple(prepared.rendered.ids), inp.sampling, inp.max_tokens,
                                                  tuple(inp.stop), view["forced"])
    else:
        generation = answer.generation
    if not generation.steps:
        st.info(f"This generation ended before its first token (finish_reason **{generation.finish_reason}**): "
                "there is no step to show. Change a setting or reload the page to run it again.",
                icon=":material/hourglass_empty:")
        st.stop()
    greedy = inp.sampling.temperature == 0
    total = len(generation.steps)
    revealed = min(view["revealed"], total)
    picked = view["picked"]

    _lesson(generation, len(prepared.rendered.ids), inp.max_tokens)
    if view["forced"]:
        st.info(f"You are looking at a branch: you picked another token at step "
                f"{', '.join(str(p + 1) for p in picked)}; the loop continued from there.", icon=":material/call_split:")
    _controls(total, revealed, bool(view["forced"]))
    st.caption(f"Showing {revealed} of {total} steps. The whole loop already ran on the model (cached); "
               "these buttons replay it step by step.")

    st.subheader("The answer so far", anchor=False)
    show_text("".join(s.delta for s in generation.steps[:revealed]) or "(nothing yet)", limit=4000)
    if revealed:
        _logprobs(generation.steps[:revealed])
    _step_detail(generation, revealed, picked, greedy)

    st.subheader("Step by step", anchor=False)
    shown = generation.steps[:revealed]
    fitted_table(_table(shown[-TABLE_ROWS:], picked, greedy), ["Step", "Token", "Probability", "Time (ms)"],
                 key="generation_steps", full_from=900, hide_index=True,
                 narrow_widths={"Step": 50, "Token": 120, "Probability": 90, "Time (ms)": 80})
    if len(shown) > TABLE_ROWS:
        st.caption(f"The table shows the last {TABLE_ROWS} of {len(shown)} steps.")
    st.plotly_chart(steps_figure(shown, picked, total), key="steps", theme=None)
    st.caption(f"Step 1's time excludes the prefill ({1000 * generation.prefill_seconds:.0f} ms for the "
               f"{len(prepared.rendered.ids)} prompt tokens): its logits come from that pass.")
    if revealed >= total:
        _finish(generation, settings)
