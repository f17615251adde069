"""The forward pass on the real model: logits, attention, logit lens and input embeddings."""

import numpy as np
import pytest
import torch

from lifecycle.errors import LifecycleError
from lifecycle.stages.forward_pass import cosine_similarity_matrix, embed_words, pca_2d, run_forward

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def ids(loaded) -> list[int]:
    return loaded.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def full(loaded, ids):
    return run_forward(loaded, ids)


@pytest.fixture(scope="module")
def reference(loaded, ids):
    """The model's own outputs, asked for the usual way (all attentions, all positions)."""
    with loaded.lock, torch.inference_mode():
        return loaded.model(torch.tensor([ids]), output_attentions=True)


def test_last_logits_equal_the_model_output(full, reference, ids):
    expected = reference.logits[0, -1].numpy()
    assert full.last_logits.shape == expected.shape and full.last_logits.dtype == np.float32
    assert np.allclose(full.last_logits, expected, atol=1e-4)
    assert full.ids == ids and full.seconds > 0


def test_the_model_predicts_paris(loaded, full):
    assert loaded.tokenizer.decode([int(np.argmax(full.last_logits))]) == " Paris"
    assert full.logit_lens[-1].candidates[0].text == " Paris"


def test_attention_is_row_stochastic_causal_and_matches_the_model(loaded, full, reference, ids):
    assert sorted(full.attentions) == list(range(loaded.num_layers))
    assert full.attention_note == ""
    for layer, weights in full.attentions.items():
        assert weights.shape == (loaded.num_heads, len(ids), len(ids)) and weights.dtype == np.float32
        assert np.allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (np.triu(weights, k=1) == 0).all()
        assert np.allclose(weights, reference.attentions[layer][0].numpy(), atol=1e-6)


def test_only_requested_layers_are_kept(loaded, ids):
    fp = run_forward(loaded, ids, layers=[29, 0, 7, 7])
    assert sorted(fp.attentions) == [0, 7, 29]
    assert run_forward(loaded, ids, layers=[]).attentions == {}


def test_attention_cap_keeps_the_last_tokens_and_says_so(loaded):
    text = "Tokens flow through thirty layers of attention before the model picks a next word for the user."
    long_ids = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    cap = 8
    assert len(long_ids) > cap
    capped = run_forward(loaded, long_ids, layers=[3], max_attention_tokens=cap)
    uncapped = run_forward(loaded, long_ids, layers=[3])
    assert capped.attentions[3].shape == (loaded.num_heads, cap, cap)
    assert np.allclose(capped.attentions[3], uncapped.attentions[3][:, -cap:, -cap:], atol=1e-6)
    assert capped.attention_offset == len(long_ids) - cap
    assert f"last {cap} of {len(long_ids)}" in capped.attention_note
    assert f"first {len(long_ids) - cap} tokens" in capped.attention_note
    assert np.allclose(capped.last_logits, uncapped.last_logits)


def test_logit_lens_last_layer_is_the_real_output_distribution(loaded, full):
    assert [guess.layer for guess in full.logit_lens] == list(range(loaded.num_layers))
    logits = full.last_logits.astype(np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    expected = np.argsort(-probs)[:5]
    last = full.logit_lens[-1]
    assert [c.id for c in last.candidates] == expected.tolist()
    assert np.allclose([c.probability for c in last.candidates], probs[expected], atol=1e-5)
    # Early layers guess differently: the lens shows the prediction forming.
    assert full.logit_lens[0].candidates[0].id != last.candidates[0].id


def test_embeddings_are_the_input_token_vectors(loaded, full, ids):
    table = loaded.model.model.embed_tokens.weight.detach().numpy()
    assert full.embeddings.shape == (len(ids), table.shape[1])
    assert np.array_equal(full.embeddings, table[ids])
    assert full.hidden_last.shape == (loaded.num_layers, table.shape[1])


@pytest.mark.parametrize(
    "kwargs,param",
    [
        ({"ids": []}, "ids"),
        ({"ids": [1, 49152]}, "ids"),
        ({"ids": [1, -1]}, "ids"),
        ({"ids": [1, 2], "layers": [30]}, "layers"),
        ({"ids": [1, 2], "max_attention_tokens": 0}, "max_attention_tokens"),
        ({"ids": [1] * 600, "max_attention_tokens": 600}, "max_attention_tokens"),
    ],
)
def test_bad_input_is_rejected_before_running(loaded, kwargs, param):
    with pytest.raises(LifecycleError) as caught:
        run_forward(loaded, **kwargs)
    assert caught.value.param == param


def test_word_embeddings_put_related_words_closer(loaded):
    words = ["car", "automobile", "vehicle", "truck", "banana"]
    vectors = embed_words(loaded, words)
    assert vectors.shape == (5, loaded.model.config.hidden_size)
    single = loaded.tokenizer.encode(" car", add_special_tokens=False)
    assert len(single) == 1
    assert np.array_equal(vectors[0], loaded.model.model.embed_tokens.weight[single[0]].detach().numpy())
    similarity = cosine_similarity_matrix(vectors)
    assert np.allclose(np.diag(similarity), 1.0) and np.allclose(similarity, similarity.T)
    assert similarity[0, 2] > similarity[0, 4] and similarity[0, 3] > similarity[0, 4]
    assert pca_2d(vectors).shape == (5, 2)
    with pytest.raises(LifecycleError):
        embed_words(loaded, ["car", " "])


def test_pca_2d_recovers_the_main_directions():
    rng = np.random.default_rng(0)
    t = np.linspace(-5, 5, 20)
    points = np.outer(t, [1.0, 2.0, 2.0]) + np.outer(rng.standard_normal(20), [2.0, -1.0, 0.0]) * 0.1
    coords = pca_2d(points)
    assert coords.shape == (20, 2)
    assert np.allclose(coords.mean(0), 0.0, atol=1e-12)
    assert np.allclose(np.abs(coords[:, 0]), np.abs(t) * 3.0, atol=0.2)
    assert coords[:, 0].var() > 100 * coords[:, 1].var()
    assert np.allclose(pca_2d(points[:1]), 0.0)


def test_cosine_similarity_matrix():
    vectors = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 0.0], [0.0, 0.0], [-1.0, 0.0]])
    expected = np.array(
        [
            [1, 0, 1, 0, -1],
            [0, 1, 0, 0, 0],
            [1, 0, 1, 0, -1],
            [0, 0, 0, 0, 0],
            [-1, 0, -1, 0, 1],
        ]
    )
    assert np.allclose(cosine_similarity_matrix(vectors), expected)
