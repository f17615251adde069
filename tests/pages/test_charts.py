"""The shared chart theme and the journey map's waterfall builder (pure Plotly, no page needed)."""

import plotly.graph_objects as go
import plotly.io as pio

from charts.journey import latency_waterfall
from charts.theme import OKABE_ITO, TEMPLATE, axis_title


def test_template_uses_large_fonts_and_the_colour_blind_safe_palette():
    layout = TEMPLATE.layout
    assert layout.font.size >= 16
    assert list(layout.colorway) == list(OKABE_ITO)
    assert pio.to_json(go.Figure(layout=dict(template=TEMPLATE)))  # the template is valid Plotly


def test_waterfall_bars_start_where_the_previous_stage_ended():
    figure = latency_waterfall([("tokenize", 0.002), ("prefill", 0.120), ("decode", 0.5)])
    bar = figure.data[0]
    assert list(bar.y) == ["tokenize", "prefill", "decode"]
    assert list(bar.x) == [2.0, 120.0, 500.0]
    assert list(bar.base) == [0.0, 2.0, 122.0]
    assert figure.layout.xaxis.title.text == axis_title("Time since the request", "ms")
