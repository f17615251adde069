"""Embeddings page charts: the figures carry exactly the numbers they are given, labelled."""

import numpy as np
import plotly.graph_objects as go

from charts.theme import DIVERGING
from charts.embeddings import embedding_strip, pca_map, similarity_matrix, token_labels


def test_token_labels_are_unique_and_show_whitespace():
    labels = token_labels([" the", " the", "\n"], start=5)
    assert labels == ["5: ␣the", "6: ␣the", "7: ↵"]
    assert len(set(labels)) == 3


def test_strip_keeps_the_first_dims_centred_on_zero():
    vectors = np.arange(-12, 12, dtype=float).reshape(2, 12) / 10
    figure = embedding_strip(vectors, ["0: 'a'", "1: 'b'"], dims=5)
    heat = figure.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), vectors[:, :5])
    assert heat.zmid == 0 and heat.zmin == -heat.zmax == -1.2
    assert heat.colorscale == go.Heatmap(colorscale=DIVERGING).colorscale
    assert list(heat.y) == ["0: 'a'", "1: 'b'"]
    assert "first 5 of 12" in figure.layout.xaxis.title.text


def test_pca_map_has_one_labelled_trace_per_group():
    coords = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    figure = pca_map(coords, ["car", "truck", " sky"], ["your words", "your words", "prompt tokens"])
    assert [t.name for t in figure.data] == ["your words", "prompt tokens"]
    assert list(figure.data[0].x) == [0.0, 2.0] and list(figure.data[0].y) == [1.0, 3.0]
    assert list(figure.data[1].text) == [" sky"]
    assert figure.data[0].marker.color != figure.data[1].marker.color
    assert figure.layout.xaxis.title.text.startswith("Component 1")


def test_similarity_matrix_is_fixed_to_minus_one_to_one():
    similarity = np.array([[1.0, 0.25], [0.25, 1.0]])
    figure = similarity_matrix(similarity, ["car", "banana"])
    heat = figure.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), similarity)
    assert (heat.zmin, heat.zmax, heat.zmid) == (-1.0, 1.0, 0.0)
    assert [list(row) for row in heat.text] == [["1.00", "0.25"], ["0.25", "1.00"]]


def test_pca_labels_never_overlap_and_crowded_ones_move_to_the_hover():
    from charts.embeddings import place_labels

    rng = np.random.default_rng(0)
    coords = np.vstack([rng.normal(size=(6, 2)), np.zeros((4, 2)) + 0.001 * rng.normal(size=(4, 2))])
    labels = ["automobile", "vehicle", "truck", "car", "banana", "apple", "What", " capital", " of", " India"]
    placed = place_labels(coords, labels)
    assert [text for text, _ in placed if text] and "" in [text for text, _ in placed]  # the tight cluster lost some
    figure = pca_map(coords, labels, ["w"] * 10)
    assert list(figure.data[0].customdata) == labels  # every label still in the hover
    assert sum(1 for text, _ in placed if text) >= 6
