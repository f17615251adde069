"""Attention page charts: weights drawn as given, the mosaic tiles every head, the lens labels its guesses."""

import numpy as np
import pytest

from charts.attention import attention_bars, attention_heatmap, attention_mosaic, block_mean, logit_lens_chart


def causal(size: int, seed: int = 0) -> np.ndarray:
    raw = np.tril(np.random.default_rng(seed).random((size, size))) + np.eye(size)
    return raw / raw.sum(-1, keepdims=True)


def test_heatmap_draws_the_weights_with_query_rows_and_key_columns():
    weights = causal(3)
    figure = attention_heatmap(weights, ["0: 'a'", "1: 'b'", "2: 'c'"], "Layer 1, head 2", highlight_row=2)
    heat = figure.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), weights)
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    assert figure.layout.yaxis.title.text.startswith("Query") and figure.layout.xaxis.title.text.startswith("Key")
    (box,) = figure.layout.shapes
    assert (box.y0, box.y1) == (1.5, 2.5)


@pytest.mark.parametrize("rows, size", [(10, 4), (7, 3), (5, 24)])
def test_block_mean_averages_blocks_and_keeps_the_mean(rows, size):
    matrix = np.random.default_rng(1).random((rows, rows))
    blocks = block_mean(matrix, size)
    assert blocks.shape == (min(size, rows),) * 2
    edges = np.linspace(0, rows, min(size, rows) + 1).astype(int)
    assert blocks[0, 0] == pytest.approx(matrix[: edges[1], : edges[1]].mean())
    if size >= rows:
        np.testing.assert_allclose(blocks, matrix)


def test_mosaic_places_every_layer_and_head_in_one_trace():
    attentions = {layer: np.stack([causal(4, seed=layer * 10 + h) for h in range(3)]) for layer in range(2)}
    figure = attention_mosaic(attentions, tile=24)
    assert len(figure.data) == 1
    mosaic = np.asarray(figure.data[0].z, dtype=float)
    assert mosaic.shape == (3 * 5 - 1, 2 * 5 - 1)
    np.testing.assert_allclose(mosaic[5:9, 5:9], attentions[1][1])  # layer 1 head 1: second tile across and down
    assert np.isnan(mosaic[4]).all() and np.isnan(mosaic[:, 4]).all()  # the gaps between tiles
    assert list(figure.layout.xaxis.ticktext) == ["0", "1"] and list(figure.layout.yaxis.ticktext) == ["0", "1", "2"]


def test_mosaic_downsamples_long_prompts():
    attentions = {0: np.stack([causal(100)] * 9)}
    mosaic = np.asarray(attention_mosaic(attentions, tile=20).data[0].z, dtype=float)
    assert mosaic.shape == (9 * 21 - 1, 20)


def test_bars_show_only_keys_up_to_the_query_and_mark_the_strongest():
    row = np.array([0.1, 0.7, 0.2, 0.0])
    figure = attention_bars(row, ["a", "b", "c", "d"], query=2)
    bar = figure.data[0]
    assert list(bar.y) == ["a", "b", "c"] and list(bar.x) == [0.1, 0.7, 0.2]
    colours = list(bar.marker.color)
    assert colours[1] != colours[0] == colours[2]
    assert figure.layout.xaxis.title.text.startswith("Attention weight")


def test_logit_lens_shows_each_layers_guess_and_marks_the_final_one():
    figure = logit_lens_chart([0, 1, 2], ["\n", " blue", " blue"], [0.7, 0.4, 0.9], " blue")
    bar = figure.data[0]
    assert list(bar.y) == [0, 1, 2] and list(bar.x) == [0.7, 0.4, 0.9] and bar.orientation == "h"
    assert list(bar.text) == ["↵", "␣blue", "␣blue"]
    colours = list(bar.marker.color)
    assert colours[1] == colours[2] != colours[0]
    assert figure.layout.xaxis.title.text == "Top-1 probability"
