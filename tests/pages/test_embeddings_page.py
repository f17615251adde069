"""Embeddings page: the prompt's real input vectors, and the word set's PCA and cosine similarities."""


import base64
import re

import numpy as np
import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import cosine_similarity_matrix, embed_words, run_forward, token_text
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import component_data, markdowns, plotly_figure

PROMPT = "Why is the sea salty?"
WORDS = ["car", "automobile", "vehicle", "truck", "banana", "apple"]


@pytest.fixture(scope="module")
def embeddings(loaded):
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    return run_forward(loaded, ids, layers=[]).embeddings


def strip_values(app) -> np.ndarray:
    """The vectors the page sent its strip (ui.live_strip), decoded as the browser decodes them."""
    data = component_data(app, "embedding_strip")
    values = np.frombuffer(base64.b64decode(data["values"]), dtype="<f2").astype(np.float32)
    return values.reshape(len(data["labels"]), data["dims"])


def test_strip_shows_the_prompts_real_vectors_and_the_lesson_counts_them(run_page, loaded, embeddings):
    app = run_page("embeddings", prompt=PROMPT, temperature=0, max_tokens=2)
    assert not app.exception and not app.error
    # Every dimension, for the browser's slider: float16 keeps ~3 significant digits.
    np.testing.assert_allclose(strip_values(app), embeddings, rtol=2e-3, atol=1e-4)
    data = component_data(app, "embedding_strip")
    assert data["dims"] == loaded.model.config.hidden_size and data["start"] == 64
    assert data["labels"][:2] == [f"{i}: {show_token(token_text(loaded, t))}" for i, t in enumerate(
        render_prompt(Conversation(new_message=PROMPT)).ids[:2])]
    lesson = markdowns(app)[1]  # the one sentence above the strip
    assert f"**{len(embeddings):,} tokens**" in lesson and f"**{loaded.model.config.hidden_size} numbers**" in lesson
    assert f"{len(embeddings)} vectors" in lesson
    rest = markdowns(app)[2]  # the rest of the lesson, in the expander under the strip
    assert "tie_word_embeddings=True" in rest and "no position vectors" in rest
    assert any("rows are identical" in c.value for c in app.caption)  # e.g. the repeated "\n" token


def test_word_similarities_are_the_cosines_of_the_input_vectors(run_page, loaded):
    app = run_page("embeddings", prompt=PROMPT, temperature=0, max_tokens=2)
    matrix = plotly_figure(app, "embedding_similarity").data[0]
    np.testing.assert_allclose(np.array(matrix.z), cosine_similarity_matrix(embed_words(loaded, WORDS)), atol=1e-6)
    assert list(matrix.x) == WORDS
    pca = plotly_figure(app, "embedding_pca").data
    assert [t.name for t in pca] == ["your words", "prompt tokens"] and list(pca[0].text) == WORDS

    app.text_input(key="embedding_words").set_value("king, queen").run()
    assert list(plotly_figure(app, "embedding_similarity").data[0].x) == ["king", "queen"]
    app.text_input(key="embedding_words").set_value("lonely").run()
    assert not app.exception and "at least two words" in app.error[0].value


def test_colour_caption_matches_the_colour_bar(run_page):
    """The caption names a colour for negative and positive values: the strip's colour scale must agree."""
    app = run_page("embeddings", prompt=PROMPT, temperature=0, max_tokens=2)
    scale = component_data(app, "embedding_strip")["scale"]
    caption = next(c.value for c in app.caption if "negative" in c.value)
    (low_at, lowest), (high_at, highest) = scale[0], scale[-1]
    assert (low_at, high_at) == (0, 1)
    colour_of = {"blue": lambda rgb: rgb[2] > rgb[0], "red": lambda rgb: rgb[0] > rgb[2]}
    negative = re.search(r"(\w+) is negative", caption).group(1).lower()
    positive = re.search(r"(\w+) positive", caption).group(1).lower()
    assert colour_of[negative](lowest) and colour_of[positive](highest)
