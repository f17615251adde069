"""Next-token page: the model's probability for every token in the vocabulary, at the prompt's end.

The top candidates are drawn in the browser (ui.live_bars), which also switches their scale; the Plotly
charts (the whole vocabulary, the answer's log-probabilities) come in the run after that picture is drawn.
"""

import numpy as np
import streamlit as st

from charts.logprobs import steps_logprob_figure
from charts.next_token import candidate_chart, rank_curve
from lifecycle.lessons.next_token import next_token_lesson
from lifecycle.stages.sampling import TokenCandidate
from lifecycle.stages.vocabulary import show_token
from ui.cache import finished_answer, prefilled_prompt
from ui.frame import lesson, stage_page
from ui.live_bars import live_bars
from ui.text import quoted
from ui.when_idle import details_ready

TOP_CANDIDATES = 15
DETAILS = "next_token_details"  # ui.when_idle: the Plotly charts come in the run after the bars are drawn


def render() -> None:
    with stage_page("next-token") as settings:
        prepared, prefill = prefilled_prompt(settings)
        dist = prefill.next_token
        top = dist.top(TOP_CANDIDATES)
        best = top[0]
        vocab = dist.probs.size
        lesson(next_token_lesson(len(prepared.rendered.ids), quoted(best.text), best.probability, dist.probs,
                                 dist.entropy_bits))

        left, right = st.columns(2)
        with left:
            _candidates(top)
        with right:
            st.subheader("The whole vocabulary", anchor=False)
            ready = details_ready(DETAILS)
            if ready:
                st.plotly_chart(rank_curve(dist.probs), key="next_token_curve", theme=None)
            st.caption(f"Every one of the {vocab:,} tokens, sorted by probability: from {best.probability:.1%} for "
                       f"the top token down to {dist.probs.min():.1e} for the least likely.")

        if ready:
            _entropy_and_answer(settings, dist, best, vocab)


def _entropy_and_answer(settings, dist, best: TokenCandidate, vocab: int) -> None:
    """The entropy and the greedy choice beside the first generated token, then every answer token's log-probability:
    details, in the run after the bars are drawn (a metric's code would hold back a new tab's bars)."""
    st.subheader("Entropy and the greedy choice", anchor=False)
    answer = finished_answer(settings)  # shown when the generation already ran; never waited for here
    first = answer.generation.steps[0] if answer and answer.generation.steps else None
    entropy_col, greedy_col, first_col = st.columns(3)
    entropy_col.metric("Entropy", f"{dist.entropy_bits:.2f} bits",
                       help=f"0 bits = certain; log2({vocab:,}) = {np.log2(vocab):.1f} bits = every token equally likely.")
    greedy_col.metric("Greedy decoding picks", show_token(best.text), f"{best.probability:.1%}",
                      delta_color="off", delta_arrow="off",
                      help=f"Token id {best.id}: the argmax, what temperature 0 always chooses.")
    if first:
        first_col.metric("First token generated", show_token(first.text), f"id {first.token_id}",
                         delta_color="off", delta_arrow="off")
    s = settings.sampling
    if answer is None:
        st.caption("This run's generation has not run yet: the Generation page runs it and shows which token "
                   "was chosen first.")
    elif first is None:
        st.caption("This run generated no token.")
    elif s.temperature == 0 and s.repetition_penalty == 1.0:
        verdict = "matches" if first.token_id == best.id else "does NOT match"
        st.caption(f"Temperature is 0 (greedy), so the first generated token {verdict} the argmax above.")
    else:
        same = "happens to be" if first.token_id == best.id else "is not"
        st.caption(
            f"With temperature {s.temperature:g} and repetition penalty {s.repetition_penalty:g} the first token is "
            f"drawn from the reshaped distribution (see Sampling); this time it {same} the greedy choice. Set "
            "temperature to 0 (and repetition penalty to 1) and it always is."
        )

    if answer is not None and answer.generation.steps:
        steps = answer.generation.steps
        st.subheader("Every token of the answer, highlighted by its log-probability", anchor=False)
        st.plotly_chart(steps_logprob_figure(steps), key="next_token_logprobs", theme=None)
        unsure = sum(step.base_probability < 0.5 for step in steps)
        st.caption(
            f"The distribution above is the first of {len(steps)}: the model made one at every generated token. "
            f"Each box is coloured by the probability it gave the token that was chosen (the API's `logprobs`); "
            f"{unsure} of the {len(steps)} tokens had less than 50%. Hover a token for the alternatives."
        )


def _candidates(top: list[TokenCandidate]) -> None:
    """The top candidates as bars drawn in the browser; their "Show" buttons switch the scale there, with no run."""
    st.subheader(f"Top {TOP_CANDIDATES} candidates", anchor=False)
    live_bars(candidate_chart(top), key="next_token_bars")
    st.caption(f"Together these {TOP_CANDIDATES} hold {sum(c.probability for c in top):.1%} of the "
               "probability. Log-probability is what APIs return as `logprobs`.")
