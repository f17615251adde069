"""Guess the next token: each player guesses before the model's distribution is revealed; a few rounds, a score."""

from dataclasses import replace

import streamlit as st

from charts.next_token import candidate_bars
from lifecycle.errors import LifecycleError
from lifecycle.features.guess import POINTS_BY_RANK, round_options, score_guess, score_token
from lifecycle.lessons.guess import guess_lesson
from lifecycle.stages.vocabulary import show_token
from ui.cache import inspected_prompt
from ui.frame import lesson, loaded_model, presenting, show_text, stage_page
from ui.text import quoted

FIXED_ROUNDS = (
    "What is the capital of France? Answer with one word.",
    "Finish the proverb: An apple a day keeps the",
    "Continue the sequence: 2, 4, 6, 8,",
)
REVEALED = 10
STATE = "guess_game"  # {"round": int, "results": list[GuessResult]}


def game() -> dict:
    return st.session_state.setdefault(STATE, {"round": 0, "results": []})


def next_round() -> None:
    game()["round"] += 1


def restart() -> None:
    st.session_state[STATE] = {"round": 0, "results": []}


def show_final(results: list) -> None:
    st.subheader("Final score", anchor=False)
    st.dataframe({
        "round": list(range(1, len(results) + 1)),
        "your guess": [show_token(r.token_text) for r in results],
        "rank": [r.rank for r in results],
        "probability": [f"{r.probability:.2%}" for r in results],
        "points": [r.points for r in results],
    }, hide_index=True)
    st.button("Play again", on_click=restart, key="guess_restart", icon=":material/replay:")


def ask(distribution, index: int, results: list) -> None:
    """The guess form; nothing about the distribution is on the page until the guess is locked in."""
    options = round_options(distribution, index)
    with st.form(f"guess_form_{index}"):
        picked = st.pills("Pick one…", options, format_func=lambda i: show_token(distribution.token_text(i)),
                          key=f"guess_pick_{index}")
        typed = st.text_input("…or type your own guess", key=f"guess_text_{index}", max_chars=100,
                              help="A word is read as the token it starts with, with or without a leading space "
                                   "(whichever the model ranks higher).")
        if not st.form_submit_button("Lock in and reveal", type="primary"):
            return
    tokenizer = loaded_model().tokenizer
    try:
        if typed.strip():
            with loaded_model().tokenizer_lock:
                result = score_guess(distribution, typed,
                                     lambda text: tokenizer.encode(text, add_special_tokens=False))
        elif picked is not None:
            result = score_token(distribution, picked)
        else:
            raise LifecycleError("Pick an option or type a guess first.", param="guess")
    except LifecycleError as error:
        st.error(error.message, icon=":material/error:")
        return
    results.append(result)
    st.rerun()


def reveal(distribution, result, index: int, rounds: int) -> None:
    top = distribution.top(REVEALED)
    best = top[0]
    verdict = ("exactly the model's top choice" if result.rank == 1
               else f"rank {result.rank:,} of {distribution.probs.size:,}")
    st.markdown(
        f"Your guess {quoted(result.guess)} was read as the token {quoted(result.token_text)}: **{verdict}**, with "
        f"probability **{result.probability:.2%}**, worth **{result.points} points**. The model's favourite was "
        f"{quoted(best.text)} at {best.probability:.1%}."
        + (" (Your guess takes several tokens; only its first one is scored.)" if result.split else "")
    )
    rank_col, prob_col, points_col = st.columns(3)
    rank_col.metric("Rank", f"{result.rank:,}")
    prob_col.metric("Probability", f"{result.probability:.2%}")
    points_col.metric("Points", result.points)
    st.plotly_chart(candidate_bars(top), key=f"guess_bars_{index}", theme=None)
    st.button("See the final score" if index + 1 == rounds else "Next round", on_click=next_round, type="primary",
              key=f"guess_next_{index}", icon=":material/arrow_forward:")


def render() -> None:
    with stage_page("guess") as settings:
        prompts = (settings.prompt, *FIXED_ROUNDS)
        state = game()
        best_points = POINTS_BY_RANK[0][1]
        lesson(guess_lesson(len(prompts), loaded_model().vocab_size, POINTS_BY_RANK))
        results = state["results"]
        score = f"{sum(r.points for r in results)} / {best_points * len(prompts)}"
        if presenting():  # one line on a projector, so the round's options are on the first screen
            st.markdown(f"Your score: **{score}** after {len(results)} of {len(prompts)} rounds")
        else:
            st.metric("Your score", score, f"after {len(results)} of {len(prompts)} rounds", delta_color="off",
                      delta_arrow="off")
        index = state["round"]
        if index >= len(prompts):
            show_final(results)
        else:
            st.subheader(f"Round {index + 1} of {len(prompts)}", anchor=False)
            st.caption("The prompt (sent in the chat template; the model answers as the assistant):")
            show_text(prompts[index])
            distribution = inspected_prompt(replace(settings, prompt=prompts[index]))[1].next_token
            if len(results) == index:
                ask(distribution, index, results)
            else:
                reveal(distribution, results[index], index, len(prompts))
