"""The handout's charts: for each stage of a finished journey, the page charts that carry its numbers."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from charts.attention import attention_heatmap, logit_lens_chart
from charts.context_window import budget_chart
from charts.embeddings import embedding_strip, token_labels
from charts.generation import steps_figure
from charts.kv_cache import cache_growth
from charts.next_token import candidate_bars
from charts.sampling import survivors_after_stages, survivors_figure
from charts.streaming import inter_token_latency
from lifecycle.features.handout import HandoutSection, journey_sections, render_handout
from lifecycle.journey import Journey
from lifecycle.stages.kv_cache import KVCacheShape

MAX_ROWS = 32  # tokens per heat strip or heatmap in a printed handout
STRIP_DIMS = 48


def stage_figures(journey: Journey, token_text: Callable[[int], str], cache_bytes_per_token: int,
                  multi_head_bytes_per_token: int, window: int) -> dict[str, list[go.Figure]]:
    """Charts by stage title (the stages without a chart are left out)."""
    forward = journey.forward
    texts = [token_text(i) for i in forward.ids]
    shown = texts[-MAX_ROWS:]
    offset = len(texts) - len(shown)
    lens = forward.logit_lens
    final = journey.next_token.top(1)[0]
    middle = sorted(forward.attentions)[len(forward.attentions) // 2] if forward.attentions else None
    figures: dict[str, list[go.Figure]] = {
        "Context window": [budget_chart([("this prompt", journey.budget)])],
        "Embeddings": [embedding_strip(forward.embeddings[-MAX_ROWS:], token_labels(shown, offset), STRIP_DIMS)],
        "Forward pass": [logit_lens_chart([g.layer for g in lens], [g.candidates[0].text for g in lens],
                                          [g.candidates[0].probability for g in lens], final.text)],
        "Next token": [candidate_bars(journey.next_token.top(10))],
        "Sampling": [survivors_figure(survivors_after_stages(journey.sampled))],
        "KV cache": [cache_growth(cache_bytes_per_token, multi_head_bytes_per_token, window,
                                  [("this prompt", len(forward.ids))])],
    }
    if middle is not None:
        weights = forward.attentions[middle].mean(0)[-MAX_ROWS:, -MAX_ROWS:]
        labels = token_labels(texts[forward.attention_offset:], forward.attention_offset)[-MAX_ROWS:]
        figures["Attention"] = [attention_heatmap(weights, labels, f"Layer {middle}, mean of all heads",
                                                  len(labels) - 1)]
    if journey.generation.steps:
        figures["Generation"] = [steps_figure(journey.generation.steps)]
    if journey.stream_metrics.inter_token:
        figures["Streaming"] = [inter_token_latency(np.asarray(journey.stream_metrics.inter_token))]
    return figures


def contents_table(sections: Sequence[HandoutSection]) -> str:
    """What the handout holds, stage by stage, as an HTML table (every text escaped): the stage, its key numbers and
    how many charts it carries. Plain HTML, so a new tab draws it with the message that brings it, without waiting
    for the code of Streamlit's Arrow tables."""
    rows = "".join(
        f"<tr><th scope=\"row\">{html.escape(section.title)}</th>"
        f"<td>{html.escape('; '.join(f'{key}: {value}' for key, value in section.facts))}</td>"
        f"<td>{len(section.figures)}</td></tr>"
        for section in sections
    )
    return (f'<table class="handout-contents"><thead><tr><th scope="col">stage</th><th scope="col">key numbers</th>'
            f'<th scope="col">charts</th></tr></thead><tbody>{rows}</tbody></table>')


def figure_json(figure: go.Figure) -> str:
    """A figure as Plotly JSON, the way the handout embeds it."""
    return pio.to_json(figure, validate=False)


def plotly_bundle() -> str:
    """The plotly.js library itself (the version plotly.py draws with), to inline in the handout."""
    return get_plotlyjs()


def handout_document(journey: Journey, token_text: Callable[[int], str], cache: KVCacheShape,
                     window: int) -> tuple[str, list[HandoutSection]]:
    """The handout's HTML and its sections: every stage's numbers, with that stage's charts attached."""
    sections = journey_sections(journey, cache.bytes_per_token, cache.layers, cache.query_heads, cache.kv_heads)
    figures = stage_figures(journey, token_text, cache.bytes_per_token, cache.multi_head_bytes_per_token, window)
    for section in sections:
        section.figures = [figure_json(f) for f in figures.get(section.title, [])]
    overview = {
        "whole journey, as an API call": f"{journey.total_seconds:,.2f} s",
        "the app's inspection pass (extra, for its pages)": f"{journey.inspection_seconds:,.2f} s",
        "prompt tokens (with template)": f"{len(journey.forward.ids):,}",
        "answer tokens": f"{journey.generation.completion_tokens:,}",
    }
    return render_handout(journey, sections, plotly_bundle(), overview), sections
