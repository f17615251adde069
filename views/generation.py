"""Generation page: the generation loop one token at a time, with alternatives and the finish reason.

The journey's real generation is replayed step by step in the browser (ui/live_replay: its step
buttons and slider redraw without a script run). Picking an alternative at a step reruns the loop
with that step forced to it and the steps before it forced to the tokens the run chose
(lifecycle.stages.generation.generate(forced=...)), cached per branch.
"""

import pandas as pd
import streamlit as st

from charts.generation import alternatives_figure, steps_figure
from charts.live_replay import HOW_CHOSEN, generation_replay_data, how_chosen
from charts.logprobs import steps_logprob_figure
from lifecycle.stages.generation import Generation, GenerationStep
from lifecycle.lessons.generation import generation_sentence
from lifecycle.stages.vocabulary import show_token
from ui.cache import answered_prompt, journey_results
from ui.frame import end_page, lesson, stage_page
from ui.live_replay import live_replay
from ui.settings import JourneySettings, widget_default
from ui.tables import fitted_table
from ui.when_idle import details_ready, idle_told

VIEW = "generation_view"  # session state: which run is shown and where the reader picked
DETAILS = "generation_details"  # ui.when_idle: the tabs under the replay come in the run after it is drawn
SHORT_RUN = 5
TABLE_ROWS = 200


def _view(settings: JourneySettings) -> dict:
    """This session's view of the loop, reset whenever the settings (hence the journey) change."""
    view = st.session_state.get(VIEW)
    if view is None or view["settings"] != settings:
        view = {"settings": settings, "forced": (), "picked": ()}
        st.session_state[VIEW] = view
    return view


def _pick(generation: Generation, index: int, token_id: int) -> None:
    view = st.session_state[VIEW]
    view["forced"] = (*((i, s.token_id) for i, s in enumerate(generation.steps[:index])), (index, token_id))
    view["picked"] = (*(p for p in view["picked"] if p < index), index)


def _back_to_original() -> None:
    st.session_state[VIEW].update(forced=(), picked=())


def _set_max_tokens(value: int) -> None:
    st.session_state["max_tokens"] = value  # a callback may set the sidebar widget's state


def _table(steps: list[GenerationStep], picked, greedy: bool) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Step": [s.index + 1 for s in steps],
            "Token": [show_token(s.text) for s in steps],
            "Id": [s.token_id for s in steps],
            "Probability": [f"{s.probability:.1%}" for s in steps],
            "Model's probability (T=1)": [f"{s.base_probability:.1%}" for s in steps],
            "Time (ms)": [round(s.seconds * 1000, 1) for s in steps],
            "How chosen": [HOW_CHOSEN[how_chosen(s, picked, greedy)] for s in steps],
            "Top 5 alternatives": [" · ".join(f"{show_token(c.text)} {c.probability:.0%}" for c in s.alternatives) for s in steps],
        }
    )


def _branch(generation: Generation, picked, greedy: bool) -> None:
    """Pick another token at any step and let the loop continue from there (a model run)."""
    steps = generation.steps
    chosen = st.selectbox("At step", [s.index for s in steps], key="generation_branch_step",
                          format_func=lambda i: f"{i + 1}: {show_token(steps[i].text)}")
    step = steps[chosen]
    left, right = st.columns([3, 2])
    with left:
        st.plotly_chart(alternatives_figure(step), key="alternatives", theme=None)
    with right:
        st.caption(f"Step {step.index + 1}, {HOW_CHOSEN[how_chosen(step, picked, greedy)]}: id {step.token_id}, "
                   f"probability {step.probability:.1%} after sampling ({step.base_probability:.1%} in the model's "
                   f"own distribution), {1000 * step.seconds:.1f} ms.")
        others = [c for c in step.alternatives if c.id != step.token_id]
        if others:
            alternative = st.radio("Continue from an alternative instead", others, key=f"generation_alternative_{step.index}",
                                   format_func=lambda c: f"{show_token(c.text)} ({c.probability:.1%})")
            st.button("Continue from here", on_click=_pick, args=(generation, step.index, alternative.id),
                      icon=":material/call_split:")
            st.caption("Reruns the loop on the model with the steps before this one kept and this token forced here.")
    if greedy:
        st.caption("At temperature 0 only the top token can be chosen, so the others show 0% after sampling; they "
                   "are the model's next most likely tokens.")


def _finish(generation: Generation, settings: JourneySettings) -> None:
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
    if not idle_told(DETAILS):  # the button comes with the details: its code would hold back a new tab's replay
        return
    if settings.max_tokens != SHORT_RUN:
        st.button(f"Try max_tokens = {SHORT_RUN}", on_click=_set_max_tokens, args=(SHORT_RUN,),
                  help="Sets max_tokens in the sidebar: the answer is cut with finish_reason \"length\".")
    else:
        default = widget_default("max_tokens")
        st.button(f"Back to max_tokens = {default}", on_click=_set_max_tokens, args=(default,))


def _logprobs(steps: list[GenerationStep]) -> None:
    st.plotly_chart(steps_logprob_figure(steps), key="generation_logprobs", theme=None)
    lowest = min(steps, key=lambda step: step.logprob)
    st.caption(
        f"Each token coloured by the model's own probability for it (before sampling). The least likely "
        f"token here had logprob {lowest.logprob:.2f} (p = {lowest.base_probability:.1%}) at step "
        f"{lowest.index + 1}. Hover a token for its top alternatives."
    )


def _steps(generation: Generation, picked, greedy: bool, prompt_tokens: int) -> None:
    steps = generation.steps
    fitted_table(_table(steps[-TABLE_ROWS:], picked, greedy), ["Step", "Token", "Probability", "Time (ms)"],
                 key="generation_steps", full_from=900, hide_index=True,
                 narrow_widths={"Step": 50, "Token": 120, "Probability": 90, "Time (ms)": 80})
    if len(steps) > TABLE_ROWS:
        st.caption(f"The table shows the last {TABLE_ROWS} of {len(steps)} steps.")
    st.plotly_chart(steps_figure(steps, picked, len(steps)), key="steps", theme=None)
    st.caption(f"Step 1's time excludes the prefill ({1000 * generation.prefill_seconds:.0f} ms for the "
               f"{prompt_tokens:,} prompt tokens): its logits come from that pass.")


def render() -> None:
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
            end_page()
        greedy = inp.sampling.temperature == 0
        picked = view["picked"]
        prompt_tokens = len(prepared.rendered.ids)

        lesson(generation_sentence(len(generation.steps), prompt_tokens, generation.prefill_seconds,
                                   generation.decode_seconds, generation.finish_reason, inp.max_tokens))
        if view["forced"]:
            st.info(f"You are looking at a branch: you picked another token at step "
                    f"{', '.join(str(p + 1) for p in picked)}; the loop continued from there.", icon=":material/call_split:")
            st.button("Back to the original run", on_click=_back_to_original, icon=":material/undo:")
        live_replay(generation_replay_data(generation.steps, picked, greedy, generation.prefill_seconds, prompt_tokens,
                                           generation.finish_reason), key="generation_replay")
        st.caption("The whole loop already ran on the model; the buttons and the slider replay it in your browser. "
                   "Each token of the answer is shaded by the model's own probability for it (orange: unlikely); "
                   "the bars under it are each step's chosen token.")
        _finish(generation, settings)
        with st.expander("How the loop works"):
            st.markdown(
                f"First the {prompt_tokens:,} prompt tokens ran through the model in one pass (the prefill), filling the "
                "key/value cache and giving the first next-token distribution; then each step fed only the newest "
                "token back in, took the next-token distribution, applied the sampling settings, drew one token and "
                "appended it, until an end-of-sequence token or max_tokens."
            )
        if details_ready(DETAILS):
            branch, table, logprobs = st.tabs(["Pick another token", "Step by step", "Log-probabilities"])
            with branch:
                _branch(generation, picked, greedy)
            with table:
                _steps(generation, picked, greedy, prompt_tokens)
            with logprobs:
                _logprobs(generation.steps)
