"""The Sampling page's lessons: what the sliders' sampling did to the next-token distribution, and what the
stages the API adds (grammar mask, logit bias, penalties) did before them."""

from __future__ import annotations

from lifecycle.stages.sampling import SamplingSettings


def what_if_lesson(top_probability: float, entropy_before: float, greedy: bool, settings: SamplingSettings,
                   kept: int, vocabulary: int, final_top_probability: float, entropy_after: float) -> str:
    """The what-if lesson: the model's top token and entropy, then after ``settings`` (greedy: temperature 0)
    the tokens still in play, the same token's chance and the entropy."""
    what = "greedy decoding (temperature 0)" if greedy else (
        f"temperature {settings.temperature:g}, top-p {settings.top_p:g}, top-k {settings.top_k} "
        f"and min-p {settings.min_p:g}")
    return (
        f"The model's most likely next token has a **{top_probability:.1%}** chance, and the "
        f"distribution's entropy is **{entropy_before:.2f} bits**. Sampling reshapes it before "
        f"one token is drawn: with {what} and a repetition penalty of {settings.repetition_penalty:g}, "
        f"**{kept:,} of {vocabulary:,}** tokens stay in play, the top token's chance becomes "
        f"**{final_top_probability:.1%}** and the entropy **{entropy_after:.2f} bits**."
    )


def api_stages_lesson(grammar: bool, removed: int, remaining: int, vocabulary: int, kept: int) -> str:
    """The API stages' lesson: with the json_object grammar on, the tokens its mask ``removed`` and the
    ``remaining`` that can start a JSON object; what logit bias and the penalties do; and the tokens ``kept``."""
    mask_text = (f"The grammar mask removed **{removed:,} of {vocabulary:,}** tokens: only "
                 f"**{remaining:,}** can start a JSON object." if grammar
                 else "No response_format is set, so the grammar mask removes nothing.")
    return (
        f"{mask_text} Logit bias adds its value to one token's logit (±100 all but bans or forces it); the "
        "presence penalty subtracts a fixed amount from every token already used, the frequency penalty that "
        "amount times how often it was used. Then the sliders above take over, and "
        f"**{kept:,}** {'token stays' if kept == 1 else 'tokens stay'} in play."
    )
