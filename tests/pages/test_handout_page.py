"""Handout page under AppTest: the preview's key numbers and the lesson's counts are this prompt's own."""

import numpy as np
import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward, token_text
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings, next_token_distribution
from lifecycle.stages.tokenization import tokenize
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import html_table, markdowns

PROMPT = "Why is the sea salty?"
MAX_TOKENS = 4


@pytest.fixture(scope="module")
def app(loaded):
    from tests.pages.harness import run_page

    return run_page("handout", prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS)


def facts(app) -> dict[str, str]:
    """Stage title -> its "key numbers" cell in the preview table."""
    table = html_table(app, "handout-contents")  # indexed by stage
    return dict(zip(table.index, table["key numbers"]))


def test_lesson_counts_the_stages_and_charts_in_the_preview(app):
    assert not app.exception and not app.error
    table = html_table(app, "handout-contents")
    lesson = next(m for m in markdowns(app) if "One file with this prompt's whole journey" in m)
    charts = table["charts"].astype(int).sum()
    assert f"**{len(table)} stages**" in lesson and f"**{charts} interactive charts**" in lesson


def test_key_numbers_are_this_prompts_tokens_distribution_and_generation(app, loaded):
    shown = facts(app)
    assert f"tokens: {tokenize(PROMPT).count:,}" in shown["Tokenization"]
    assert f"tokens with o200k_base: {tokenize(PROMPT, 'o200k_base').count:,}" in shown["Tokenization"]
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    assert f"prompt tokens with template: {len(ids):,}" in shown["Context window"]
    distribution = next_token_distribution(run_forward(loaded, ids, layers=[]).last_logits,
                                           lambda i: token_text(loaded, i))
    top = distribution.top(1)[0]
    assert int(np.argmax(distribution.probs)) == top.id
    assert shown["Next token"].startswith(f"#1 {show_token(top.text)}: {top.probability:.1%}")
    assert f"entropy: {distribution.entropy_bits:.2f} bits" in shown["Next token"]
    generation = generate(loaded, ids, SamplingSettings(temperature=0.0), MAX_TOKENS)
    assert f"tokens generated: {generation.completion_tokens}" in shown["Generation"]
    assert f"finish_reason: {generation.finish_reason}" in shown["Generation"]
