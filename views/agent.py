"""Agents and their attack surface: the tool loop, the system prompt measured as a tendency,
temperature 0's different roads, and the guardrail that lives outside the model.

The loop runs through lifecycle.features.agent, the measurements through lifecycle.features.injection and
lifecycle.features.determinism (every model call an engine request or job); the sentences come from
lifecycle.lessons.agent, chosen by this run's numbers. The loop's rounds are drawn in the browser (ui.live_bars); the
round limit, the table, the measurements and their Plotly charts come in the run after that picture is drawn
(ui.when_idle).
``prepare`` computes all three for a prompt outside any session (the warm route, ui.warm_pages).
"""

import json

import pandas as pd
import streamlit as st

from charts.agent import compliance_figure, round_bars, roads_figure
from lifecycle.features.agent import LOCAL_TOOLS, MAX_ROUNDS, AgentRun, engine_send, run_agent
from lifecycle.lessons.agent import (agent_loop_lesson, injection_sentence, roads_sentence, summation_sentence,
                                     tendency_sentence)
from lifecycle.stages.context_window import render_messages
from lifecycle.features.determinism import DeterminismRun, compare_roads
from lifecycle.errors import LifecycleError
from lifecycle.features.guardrail import check_seconds, parse_guardrail
from lifecycle.features.injection import CASES, MAX_DRAWS, InjectionRun, InjectionSetup, measure_injection, targets
from lifecycle.model import LoadedModel
from ui.cache import per_prompt_cache
from ui.frame import input_error, lesson, loaded_model, show_text, stage_page
from ui.live_bars import live_bars
from ui.settings import JourneySettings
from ui.tables import fitted_table
from ui.when_idle import details_ready, idle_told

AGENT_MAX_TOKENS = 64
AGENT_ROUNDS = 3
DRAWS = 12
DETAILS = "agent_details"  # ui.when_idle: the round limit, the rounds' table and the measurements follow the rounds


@per_prompt_cache
def _agent(messages_json: str, rounds: int, _loaded) -> AgentRun:
    return run_agent(json.loads(messages_json), engine_send(_loaded, AGENT_MAX_TOKENS), max_rounds=rounds)


@per_prompt_cache
def _injection(setup: InjectionSetup, draws: int, _loaded) -> InjectionRun:
    return measure_injection(_loaded, setup, draws)


@per_prompt_cache
def _roads(messages_json: str, _loaded) -> DeterminismRun:
    return compare_roads(_loaded, render_messages(json.loads(messages_json)).ids)


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """What this page computes for ``settings`` with its own controls at their defaults, into the shared cache."""
    messages = json.dumps(settings.messages())
    _agent(messages, AGENT_ROUNDS, loaded)
    _injection(InjectionSetup().checked(), DRAWS, loaded)
    _roads(messages, loaded)


def _reply(round_) -> str:
    """What a round sent back, as a row label: its tool calls (names only), or that it answered."""
    calls = [call["function"]["name"] for call in round_.reply.tool_calls]
    return ", ".join(calls) if calls else f"answer ({round_.reply.finish_reason})"


def _agent_loop(messages: list[dict], loaded, ready: bool) -> AgentRun:
    """The loop's lesson and rounds, with the round limit under them once the page is ``ready`` for its details
    (until then the limit is the default)."""
    st.subheader("The agent loop: call, run the tool, call again", anchor=False)
    picture = st.container()
    rounds = st.number_input("Round limit", 1, MAX_ROUNDS, AGENT_ROUNDS, key="agent_rounds") if ready else AGENT_ROUNDS
    with picture:
        with st.spinner("Running the loop…", show_time=True):
            run = _agent(json.dumps(messages), int(rounds), loaded)
        first, last = run.rounds[0], run.rounds[-1]
        calls = sum(len(r.reply.tool_calls) for r in run.rounds)
        errors = sum("error" in result for r in run.rounds for result in r.tool_results)
        lesson(agent_loop_lesson(len(run.rounds), run.outcome, calls, errors, [tool.name for tool in LOCAL_TOOLS],
                                 first.prompt_tokens, last.prompt_tokens, last.cached_tokens))
        live_bars(round_bars([r.prompt_tokens for r in run.rounds], [r.cached_tokens for r in run.rounds],
                             [_reply(r) for r in run.rounds]), key="agent_rounds_bars")
    return run


def _rounds(run: AgentRun) -> None:
    rows = [{"round": r.index, "messages sent": len(r.messages), "prompt tokens": r.prompt_tokens,
             "cached tokens": r.cached_tokens, "finish_reason": r.reply.finish_reason,
             "tool call": "; ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in r.reply.tool_calls),
             "tool result": "; ".join(json.dumps(result) for result in r.tool_results)} for r in run.rounds]
    fitted_table(pd.DataFrame(rows), {"round": "round", "prompt tokens": "prompt", "cached tokens": "cached",
                                      "tool call": "tool call"}, key="agent_rounds_table", full_from=640,
                 hide_index=True, narrow_widths={"round": 50, "prompt": 65, "cached": 65, "tool call": 160})
    st.caption("Every tool result is data the model reads next round, like a pasted document: the section below "
               "measures what such text can do.")
    if run.answer is not None:
        st.caption("The answer:")
        show_text(run.answer)
    with st.expander("The messages array of every round", icon=":material/forum:"):
        for r in run.rounds:
            st.caption(f"Round {r.index}: {len(r.messages)} messages, {r.prompt_tokens:,} prompt tokens")
            st.json(r.messages, expanded=False)
        st.caption(f"After the loop: {len(run.messages)} messages")
        st.json(run.messages, expanded=False)


def _setup_form() -> tuple[InjectionSetup, int]:
    default = InjectionSetup()
    with st.expander("The rule, the question and the document (edit them)", icon=":material/edit:"):
        rule = st.text_input("The rule (the system prompt)", default.rule, key="inj_rule")
        phrase = st.text_input("The phrase it forbids", default.phrase, key="inj_phrase")
        question = st.text_input("The user's question", default.question, key="inj_question")
        document = st.text_area("The retrieved document pasted into the user message", default.document,
                                key="inj_document", height=90)
        lead_in = st.text_input("The answer's fixed start, where the next-token probability is read",
                                default.lead_in, key="inj_lead_in")
        draws = st.number_input("Seeded answers per case", 1, MAX_DRAWS, DRAWS, key="inj_draws")
    return InjectionSetup(rule, phrase, question, document, lead_in), int(draws)


def _tendency(loaded) -> InjectionRun | None:
    st.subheader("The system prompt is a tendency, measured", anchor=False)
    setup, draws = _setup_form()
    try:
        setup = setup.checked()
        with st.spinner(f"Sampling {draws} answers in each of {len(CASES)} cases…", show_time=True):
            run = _injection(setup, draws, loaded)
    except LifecycleError as error:
        input_error(error)
        return None
    by = {c.case: c for c in run.cases}
    lesson(tendency_sentence(draws, by["no rule"].leaks, by["rule in the system prompt"].leaks,
                             by["no rule"].first_token_mass, by["rule in the system prompt"].first_token_mass))
    st.plotly_chart(compliance_figure(list(CASES), [c.first_token_mass for c in run.cases],
                                      [c.leaks for c in run.cases], draws), key="agent_compliance", theme=None)
    st.markdown(injection_sentence(draws, by["document"].leaks, by["rule hidden in the document"].leaks,
                                   by["document"].first_token_mass, by["rule hidden in the document"].first_token_mass))
    said = " or ".join(f"“{t}”" for t in targets(setup.phrase))
    st.caption(f"Blue: the probability (temperature 1) that the token after the answer's fixed start begins {said}. "
               f"Orange: of {draws} answers sampled at temperature 1 with seeds 0 to {draws - 1} (the same seeds in "
               f"every case), how many say it anywhere (case-insensitive).")
    rows = [{"case": c.case, "prompt tokens": c.prompt_tokens, "first token": f"{100 * c.first_token_mass:.1f}%",
             "answers saying it": f"{c.leaks} of {draws}",
             "likeliest such tokens": ", ".join(f"{json.dumps(t)} {100 * p:.1f}%" for t, p in c.leaking_tokens[:3])}
            for c in run.cases]
    fitted_table(pd.DataFrame(rows), {"case": "case", "first token": "first token", "answers saying it": "answers"},
                 key="agent_cases", full_from=640, hide_index=True,
                 narrow_widths={"case": 170, "first token": 80, "answers": 90})
    with st.expander("Every sampled answer", icon=":material/list:"):
        for c in run.cases:
            st.caption(f"{c.case}: the messages sent")
            st.json(setup.messages(c.case), expanded=False)
            st.dataframe(pd.DataFrame({"seed": range(draws), "answer": c.answers}), hide_index=True,
                         key=f"agent_answers_{CASES.index(c.case)}")
    return run


def _guardrail(run: InjectionRun) -> None:
    st.subheader("A guardrail outside the model", anchor=False)
    guard = parse_guardrail({"block": targets(run.setup.phrase)})
    hidden = run.case("rule hidden in the document")
    answers = [answer for c in run.cases for answer in c.pieces]
    stopped = sum(guard.first_match("".join(pieces)) is not None for pieces in answers)
    tokens = sum(len(pieces) for pieces in answers)
    cost = sum(check_seconds(guard, pieces) * len(pieces) for pieces in answers) / max(tokens, 1)
    st.markdown(
        f"A rule that must hold is checked on what the model wrote, not asked of it. The block list "
        f"{', '.join(json.dumps(p) for p in guard.block)} run over all **{len(answers)}** sampled answers above would "
        f"have stopped **{stopped}** of them (the {hidden.leaks} of the injected case among them) with finish_reason "
        f"`content_filter`, whatever the prompt said. It runs after detokenization, on each piece of text before "
        f"it is sent: measured here, **{cost * 1e6:.1f} µs per token** over {tokens:,} tokens."
    )
    st.caption("On the API a request opts in with \"guardrail\": {\"block\": [...]} on /v1/chat/completions; the "
               "Streaming page runs it on a live stream. An empty list, an empty phrase, more than 64 phrases or "
               "one longer than 80 characters is refused with a 400 naming guardrail.block.")


def _temperature_zero(messages: list[dict], loaded) -> None:
    st.subheader("Temperature 0 is not a promise", anchor=False)
    with st.spinner("Running the same prompt down every road…", show_time=True):
        run = _roads(json.dumps(messages), loaded)
    step, gap = run.narrowest
    st.markdown(roads_sentence(len(run.answer_ids), [(r.name, r.largest) for r in run.roads],
                               [(r.name, r.changed_steps) for r in run.roads], step, gap))
    st.plotly_chart(roads_figure([r.name for r in run.roads], [r.largest for r in run.roads], gap),
                    key="agent_roads", theme=None)
    st.caption(f"Each bar: the largest difference from the alone road (prefill, then one token a step: {run.kernel}) "
               f"over the answer's {len(run.answer_ids)} tokens. Dashed line: half the narrowest gap between the alone "
               "road's two best logits; a road must reach it before a greedy pick can change (the best logit "
               "falling and the second rising by half the gap each close it).")
    with st.expander("Each road, and one logit summed in two orders", icon=":material/functions:"):
        s = run.summation
        st.markdown(summation_sentence(s.forward, s.backward, s.exact, s.terms))
        fitted_table(pd.DataFrame([{"road": r.name, "kernel": r.kernel, "largest difference": f"{r.largest:.2e}",
                                    "greedy pick changed at": ", ".join(map(str, r.changed_steps)) or "no step"}
                                   for r in run.roads]), ["road", "largest difference"], key="agent_roads_table",
                     full_from=640, hide_index=True)
        st.caption("The greedy answer on the alone road:")
        show_text(run.answer_text)


def render() -> None:
    with stage_page("agent") as settings:
        loaded = loaded_model()
        run = _agent_loop(settings.messages(), loaded, idle_told(DETAILS))
        if not details_ready(DETAILS):
            return
        _rounds(run)
        measured = _tendency(loaded)
        if measured is not None:
            _guardrail(measured)
        _temperature_zero(settings.messages(), loaded)
