"""Embeddings page: each token id picks a row of the embedding table, a vector of the model's hidden size.

The strip is drawn in the browser (ui.live_strip), its slider too; the word map's Plotly charts come in the
word map's own run once the strip is drawn (ui.when_idle), so a new tab does not wait for plotly.js.
"""

import numpy as np
import streamlit as st

from charts.theme import DIVERGING_MEANING
from charts.embeddings import pca_map, similarity_matrix, strip_data, token_labels
from lifecycle.errors import LifecycleError
from lifecycle.journey import PreparedPrompt
from lifecycle.model import LoadedModel
from lifecycle.stages.forward_pass import ForwardPass, cosine_similarity_matrix, embed_words, pca_2d, pca_share, token_text
from lifecycle.lessons.embeddings import embedding_sentence, pca_sentence
from ui.cache import inspected_prompt, per_prompt_cache
from ui.frame import lesson, loaded_model, stage_page
from ui.live_strip import live_strip
from ui.text import quoted
from ui.when_idle import details_ready

DEFAULT_WORDS = "car, automobile, vehicle, truck, banana, apple"
MAX_STRIP_TOKENS = 96
MAX_MAP_TOKENS = 40
MAX_WORDS = 24
DETAILS = "embeddings_details"  # ui.when_idle: the word map's Plotly charts come in its run after the strip is drawn
STRIP_HINT = "Point at a cell for its token, dimension and value."


@per_prompt_cache
def word_vectors(words: tuple[str, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
    """Each word's input vector (mean over its tokens) and how many tokens it takes, as " word"."""
    loaded = loaded_model()
    with loaded.tokenizer_lock:
        counts = tuple(len(loaded.tokenizer.encode(" " + w, add_special_tokens=False)) for w in words)
    return embed_words(loaded, list(words)), counts


def parse_words(text: str) -> list[str]:
    words = list(dict.fromkeys(w.strip() for w in text.replace("\n", ",").split(",") if w.strip()))
    if len(words) < 2:
        raise LifecycleError("Type at least two words, separated by commas.", param="words")
    if len(words) > MAX_WORDS:
        raise LifecycleError(f"At most {MAX_WORDS} words, please ({len(words)} given).", param="words")
    return words


def repeated_token(ids: list[int], vectors: np.ndarray) -> tuple[int, list[int], bool] | None:
    """The most repeated token id, its positions, and whether all its rows are identical."""
    values, counts = np.unique(ids, return_counts=True)
    if counts.max() < 2:
        return None
    token = int(values[counts.argmax()])
    positions = [i for i, t in enumerate(ids) if t == token]
    same = all(np.array_equal(vectors[positions[0]], vectors[p]) for p in positions[1:])
    return token, positions, same


def render() -> None:
    with stage_page("embeddings") as settings:
        prepared, inspection = inspected_prompt(settings)
        loaded = loaded_model()
        config = loaded.model.config
        forward = inspection.forward
        vectors = forward.embeddings
        texts = [token_text(loaded, i) for i in forward.ids]
        count, dims = vectors.shape
        user_count = len(prepared.prompt_tokens.tokens)
        norms = np.linalg.norm(vectors, axis=1)
        tied = "the same table" if config.tie_word_embeddings else "a separate table"
        lesson(embedding_sentence(user_count, count, config.vocab_size, dims))
        _strip(vectors, texts)
        with st.expander("What else these vectors tell", icon=":material/menu_book:"):
            st.markdown(
                f"Their lengths range from {norms.min():.2f} to {norms.max():.2f}. Nothing else is added: SmolLM2 "
                f"has no position vectors. Where a token sits enters later, inside attention, by rotating queries "
                f"and keys (RoPE, base {config.rope_parameters['rope_theta']:,.0f}). At the very end, {tied} turns "
                f"the last hidden state into one score per vocabulary token: input and output embeddings are tied "
                f"(`tie_word_embeddings={config.tie_word_embeddings}`)."
            )
            repeat = repeated_token(forward.ids, vectors)
            if repeat:
                token, positions, same = repeat
                verdict = "identical: the vector does not depend on position" if same else "NOT identical"
                st.caption(
                    f"Check: token {token} ({quoted(texts[positions[0]])}) appears at positions "
                    f"{', '.join(map(str, positions[:8]))}; its {len(positions)} rows are {verdict}."
                )

        _word_map(prepared, forward, loaded)


def _strip(vectors: np.ndarray, texts: list[str]) -> None:
    """The embedding strip, drawn in the browser with its "Dimensions shown" slider (no script run)."""
    count, dims = vectors.shape
    rows = min(count, MAX_STRIP_TOKENS)
    live_strip(strip_data(vectors[:rows], token_labels(texts[:rows]), STRIP_HINT), key="embedding_strip")
    st.caption(f"{DIVERGING_MEANING} Single dimensions carry no readable meaning; "
               "meaning lives in directions spread over many of them."
               + (f" Showing the first {rows:,} of {count:,} tokens." if rows < count else ""))


@st.fragment
def _word_map(prepared: PreparedPrompt, forward: ForwardPass, loaded: LoadedModel) -> None:
    """The visitor's words on a map with the prompt's tokens: another word list reruns this fragment alone."""
    vectors = forward.embeddings
    dims = vectors.shape[1]
    st.subheader("Which words sit close together?", anchor=False)
    if not details_ready(DETAILS):  # the box comes with the map: its code would hold back a new tab's strip
        return
    typed = st.text_input("Words to compare (comma-separated)", DEFAULT_WORDS, key="embedding_words",
                          help="Each word is embedded as it appears mid-sentence, with a leading space.")
    try:
        words = parse_words(typed)
        word_vecs, token_counts = word_vectors(tuple(words))
    except LifecycleError as error:
        st.error(error.message, icon=":material/error:")
    else:
        by_id = {token_id: row for token_id, row in zip(forward.ids, vectors)}
        prompt_ids = list(dict.fromkeys(t.id for t in prepared.prompt_tokens.tokens if t.id in by_id))
        prompt_ids = prompt_ids[:MAX_MAP_TOKENS]
        points = np.vstack([word_vecs, *[by_id[i][None] for i in prompt_ids]])
        labels = words + [token_text(loaded, i) for i in prompt_ids]
        groups = ["your words"] * len(words) + ["prompt tokens"] * len(prompt_ids)
        coords = pca_2d(points)
        left, right = st.container(), st.container()  # one under the other: each chart gets the full width
        with left:
            st.plotly_chart(pca_map(coords, labels, groups), key="embedding_pca", theme=None)
            st.caption(pca_sentence(len(points), dims, pca_share(points)))
        with right:
            similarity = cosine_similarity_matrix(word_vecs)
            st.plotly_chart(similarity_matrix(similarity, words), key="embedding_similarity", theme=None)
            split = [f"{quoted(w)} ({n} tokens)" for w, n in zip(words, token_counts) if n > 1]
            st.caption(
                "Cosine similarity: 1 = same direction, 0 = unrelated. These are the raw input vectors, "
                "before any layer has seen context."
                + (f" Averaged over several tokens: {', '.join(split)}." if split else "")
            )
