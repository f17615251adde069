"""Tokenization page views: token chips (escaped HTML) and the per-language token-count chart.

Chips alternate two light Okabe-Ito tints so neighbouring tokens stay distinct for every common
colour-vision deficiency; special tokens are dark, and tokens holding only part of a UTF-8
character get a dashed border. Every piece of token text goes through ``html.escape``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from charts.theme import LEGEND_BELOW, OKABE_ITO, TEMPLATE, axis_title, wrap_label
from lifecycle.stages.tokenization import Token
from lifecycle.stages.vocabulary import show_token

CHIP_TINTS = ("#D6EAF8", "#FCE5B6")  # light sky blue / light orange (Okabe-Ito tints)
SPECIAL_CHIP = "#000000"
ENCODING_LABELS = {"model": "SmolLM2 (model)", "o200k_base": "o200k_base (GPT-4o)", "cl100k_base": "cl100k_base (GPT-4)"}
SHORT_LABELS = {"model": "SmolLM2", "o200k_base": "o200k", "cl100k_base": "cl100k"}  # for a phone-wide table
_CHIP_STYLE = (
    "display:inline-block;margin:2px 1px;padding:1px 5px;border-radius:4px;"
    "font-family:ui-monospace,monospace;font-size:16px;line-height:1.3;text-align:center;"
    "white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%;box-sizing:border-box;vertical-align:top;"
)


def _chip(token: Token, position: int) -> str:
    hex_bytes = " ".join(f"{b:02X}" for b in token.bytes)
    kind = " · special token" if token.special else (" · part of a UTF-8 character" if token.partial else "")
    title = html.escape(f"#{position} · id {token.id} · bytes {hex_bytes}{kind}", quote=True)
    if token.special:
        colours = f"background:{SPECIAL_CHIP};color:#FFFFFF;font-weight:700;border:2px solid {SPECIAL_CHIP};"
    else:
        border = "2px dashed #D55E00" if token.partial else "1px solid #888888"
        colours = f"background:{CHIP_TINTS[position % 2]};color:#111111;border:{border};"
    text = html.escape(show_token(token.text))
    chip = (
        f'<span class="token-chip" title="{title}" style="{_CHIP_STYLE}{colours}">{text}'
        f'<br><small style="font-size:12px;opacity:0.8">{token.id}</small></span>'
    )
    return chip + ("<br>" if token.text.endswith("\n") else "")


def token_chips_html(tokens: Sequence[Token], limit: int) -> str:
    """HTML for the first ``limit`` tokens as chips (text over id; id and bytes in the hover title)."""
    chips = "".join(_chip(token, position) for position, token in enumerate(tokens[:limit]))
    return f'<div class="token-chips" style="line-height:1.2">{chips}</div>'


def language_token_chart(languages: Sequence[str], counts: Mapping[str, Sequence[int]]) -> go.Figure:
    """Grouped bars: tokens for the same sentence per language (x), one bar per tokenizer."""
    figure = go.Figure()
    for index, (encoding, values) in enumerate(counts.items()):
        figure.add_trace(
            go.Bar(
                name=ENCODING_LABELS.get(encoding, encoding),
                x=list(languages),
                y=list(values),
                marker_color=OKABE_ITO[index % len(OKABE_ITO)],
                # No number on each of the 27 bars: on a projector or a phone they shrank to specks or ran
                # together ("141414"); the table under the chart lists every count, the hover names each bar.
                hovertemplate="%{x}: %{y} tokens<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        template=TEMPLATE,
        barmode="group",
        xaxis_title=axis_title("Language"),
        yaxis_title=axis_title("Length", "tokens"),
        legend=LEGEND_BELOW,
        height=500,
    )
    return figure


def tokenizer_count_chart(counts: Mapping[str, int]) -> go.Figure:
    """Horizontal bars: how many tokens the prompt is under each tokenizer."""
    labels = [wrap_label(ENCODING_LABELS.get(encoding, encoding), 10) for encoding in counts]
    values = list(counts.values())
    figure = go.Figure(
        go.Bar(
            y=labels,
            x=values,
            orientation="h",
            marker_color=[OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(values))],
            text=[f"{v:,}" for v in values],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:,} tokens<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Your prompt's length", "tokens"),
        yaxis=dict(autorange="reversed", title=None),
        height=60 * len(values) + 120,
        showlegend=False,
    )
    return figure
