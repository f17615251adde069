"""Embeddings page charts: the figures carry exactly the numbers they are given, labelled."""

import base64

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.colors import get_colorscale, unlabel_rgb

from charts.theme import DIVERGING
from charts.embeddings import embedding_strip, pca_map, similarity_matrix, strip_data, token_labels


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


def test_the_browser_strip_carries_every_dimension_as_float16_with_the_diverging_scale():
    vectors = np.linspace(-0.9, 0.9, 2 * 40).reshape(2, 40)
    data = strip_data(vectors, ["0: a", "1: b"], "Point at a cell.")
    decoded = np.frombuffer(base64.b64decode(data["values"]), dtype="<f2").reshape(2, 40)
    np.testing.assert_allclose(decoded, vectors, rtol=1e-3)
    assert (data["dims"], data["start"], data["step"]) == (40, 40, 16)  # the slider starts at all 40 of 40
    assert [at for at, _ in data["scale"]] == pytest.approx([at for at, _ in get_colorscale(DIVERGING)])
    assert data["scale"][0][1] == list(unlabel_rgb(get_colorscale(DIVERGING)[0][1]))
    assert data["labels"] == ["0: a", "1: b"] and data["hint"] == "Point at a cell."


def test_the_browser_strip_wants_one_label_per_row():
    with pytest.raises(ValueError, match="one label per row"):
        strip_data(np.zeros((3, 8)), ["0: a"], "")


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
