"""Take it home: one prompt's whole journey as a self-contained, offline HTML handout.

``journey_sections`` turns a finished journey into one section per stage: a sentence, the stage's key
numbers and (added by the caller) its charts as Plotly JSON. ``render_handout`` writes a single HTML
file with plotly.js inlined, so it opens anywhere without a network. Every piece of text from the run
(the prompt, tokens, the model's answer) is HTML-escaped, and chart JSON is written so no string in it
can close its script element.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lifecycle.features.agent import LOCAL_TOOLS
from lifecycle.faults.client import SdkRetryPolicy
from lifecycle.features.guardrail import FINISH_REASON as GUARDRAIL_FINISH_REASON
from lifecycle.journey import Journey
from lifecycle.stages.tokenization import ENCODINGS, MODEL_ENCODING, tokenize
from lifecycle.stages.vocabulary import TOKEN_NOTATION, show_token

MAX_SHOWN_TOKENS = 80


@dataclass
class HandoutSection:
    """One stage in the handout: a plain-text summary, (label, value) key numbers, charts as Plotly JSON."""

    title: str
    summary: str
    facts: list[tuple[str, str]]
    figures: list[str] = field(default_factory=list)
    literal: str = ""  # text shown as-is in a monospace block (a request body, the answer)
    from_run: bool = True  # False: its numbers are not this run's (the SDK's retry policy, the Agents page's tools)


def _failures_section() -> HandoutSection:
    """What the installed openai SDK does when a call fails (no fault is part of this run)."""
    policy = SdkRetryPolicy()
    shortest, longest = policy.backoff_bounds(0)
    return HandoutSection(
        "Failures and retries", "The call is an HTTP request to a remote service and fails like one. The official "
        "openai SDK retries connection errors, timeouts, 408, 409, 429 and 5xx answers with exponential backoff and "
        "jitter (or what a retry-after asks), never a 400 or 401.",
        [("openai SDK", policy.version), ("retries by default", str(policy.default_max_retries)),
         ("first backoff", f"{shortest:.3f}-{longest:.3f} s"), ("longest backoff", f"{policy.max_delay:g} s"),
         ("retry-after honoured up to", f"{policy.max_retry_after:g} s")], from_run=False)


def _agents_section(request) -> HandoutSection:
    """What an agent adds around this call (the loop runs on the Agents page, not in this journey)."""
    return HandoutSection(
        "Agents and their attack surface", "An agent is a program calling this same stateless API in a loop: it "
        "runs the tool the model asked for, appends the result as a tool message and calls again, re-sending the "
        "whole conversation each round. The system prompt is a tendency, not a rule, and text pasted into a "
        "message (a document, a tool result) can steer the model, so checks belong outside it. The loop is not "
        "part of this journey: the Agents page runs it on the model.",
        [("tools offered in this request", str(len(request.output.tools))),
         ("local tools on the Agents page", ", ".join(tool.name for tool in LOCAL_TOOLS)),
         ("a guardrail's stop reason", GUARDRAIL_FINISH_REASON)], from_run=False)


def journey_sections(journey: Journey, cache_bytes_per_token: int, layers: int, heads: int, kv_heads: int) -> list[HandoutSection]:
    """The journey's stages in order, with this run's numbers (no charts yet)."""
    request, budget, generation = journey.request, journey.budget, journey.generation
    prompt_ids = journey.forward.ids
    usage = journey.response.get("usage") or {}
    top = journey.next_token.top(5)
    lens = journey.forward.logit_lens
    settled = _settles_at([g.candidates[0].id for g in lens], top[0].id)
    metrics = journey.stream_metrics
    user_tokens = journey.prompt_tokens
    body = request.wire_body()
    return [
        HandoutSection("Request", "The client sends one JSON body over HTTP; the API keeps no memory between calls, "
                       "so every request carries the whole conversation.",
                       [("model", request.model), ("messages", str(len(request.messages))),
                        ("temperature", f"{request.sampling.temperature:g}"), ("max_tokens", str(request.max_tokens)),
                        ("body size", f"{len(body):,} bytes")], literal=body.decode("utf-8", "replace")),
        HandoutSection("Gateway", "Before any model runs, the gateway checks the API key, charges the request "
                       "against per-key rate limits (requests and tokens per minute), routes it to a model and "
                       "writes the call log.",
                       [("routed to", journey.model_name),
                        ("tokens a limiter reserves", f"{budget.prompt_tokens + (request.max_tokens or 0):,} "
                                                      "(prompt + max_tokens)")]),
        _failures_section(),
        HandoutSection("Tokenization", f"The text becomes token ids from the model's vocabulary. {TOKEN_NOTATION}",
                       [("characters", f"{len(user_tokens.text):,}"), ("tokens", f"{user_tokens.count:,}"),
                        ("characters per token", f"{len(user_tokens.text) / max(1, user_tokens.count):.2f}")]
                       + [(f"tokens with {name}", f"{tokenize(journey.input.prompt, name).count:,}")
                          for name in ENCODINGS if name != MODEL_ENCODING],
                       literal=" | ".join(show_token(t.text) for t in user_tokens.tokens[:MAX_SHOWN_TOKENS])
                       + (" …" if user_tokens.count > MAX_SHOWN_TOKENS else "")),
        HandoutSection("Context window", "The chat template wraps every message in role markers; all of it, plus "
                       "the room reserved for the answer, must fit the window.",
                       [("prompt tokens with template", f"{budget.prompt_tokens:,}"), ("window", f"{budget.window:,}"),
                        ("reserved for the answer", f"{budget.output_reserve:,}"), ("free", f"{budget.free:,}")]),
        HandoutSection("Embeddings", "Each token id selects one row of the embedding table: a vector of numbers.",
                       [("vectors", f"{journey.forward.embeddings.shape[0]:,}"),
                        ("numbers per vector", f"{journey.forward.embeddings.shape[1]:,}")]),
        HandoutSection("Forward pass", "The vectors pass through every transformer block: attention mixes in "
                       "earlier tokens, the MLP transforms each token, and both add to the residual stream.",
                       [("blocks", str(layers)), ("query heads / key-value heads", f"{heads} / {kv_heads}"),
                        ("the logit lens settles on the answer at layer",
                         str(settled) if settled < layers else "never")]),
        HandoutSection("Attention", "Each position looks back at earlier tokens; each row of weights sums to 1.",
                       [("layers x heads", f"{layers} x {heads}"), ("tokens read", f"{len(prompt_ids):,}")]),
        HandoutSection("Next token", "The last position's scores become a probability for every vocabulary token.",
                       [(f"#{c.rank} {show_token(c.text)}", f"{c.probability:.1%}") for c in top]
                       + [("entropy", f"{journey.next_token.entropy_bits:.2f} bits")]),
        HandoutSection("Sampling", "Temperature, top-p, top-k and min-p reshape that distribution before a token is "
                       "drawn.",
                       [("temperature", f"{journey.input.sampling.temperature:g}"),
                        ("top-p", f"{journey.input.sampling.top_p:g}"), ("top-k", str(journey.input.sampling.top_k)),
                        ("tokens left to draw from", f"{journey.sampled.kept:,}")]),
        HandoutSection("Structured output and tools", "With response_format or tools, a grammar mask allows at "
                       "each step only the tokens that keep the answer valid JSON (or a tool call)"
                       + ("; this run asked for neither, so nothing was masked."
                          if request.output.grammar is None else "."),
                       [("response_format", request.output.response_format.type),
                        ("tools offered", str(len(request.output.tools))),
                        ("tool_choice", request.output.tool_choice.mode)]),
        HandoutSection("Generation", "The chosen token is appended and the model runs again, one token at a time.",
                       [("tokens generated", str(generation.completion_tokens)),
                        ("finish_reason", generation.finish_reason),
                        ("prefill", f"{generation.prefill_seconds * 1000:,.0f} ms"),
                        ("decode, all steps", f"{generation.decode_seconds * 1000:,.0f} ms")]),
        HandoutSection("KV cache", "Every layer keeps each token's keys and values, so a decode step computes them "
                       "for the new token only.",
                       [("cache for the prompt", _size(cache_bytes_per_token * len(prompt_ids))),
                        ("added per token", _size(cache_bytes_per_token))]),
        HandoutSection("Streaming", "Server-sent events carry each new piece of text as soon as it exists.",
                       [("time to first token", f"{metrics.ttft * 1000:,.0f} ms"),
                        ("tokens per second", f"{metrics.tokens_per_second:,.1f}"),
                        ("events", str(len(journey.stream)))]),
        HandoutSection("Detokenization and response", "Token ids become bytes, then text; the response reports usage "
                       "and why it stopped.",
                       [("prompt_tokens", str(usage.get("prompt_tokens", ""))),
                        ("completion_tokens", str(usage.get("completion_tokens", ""))),
                        ("finish_reason", generation.finish_reason)], literal=generation.text),
        _agents_section(request),
    ]


def not_from_run(sections: Sequence[HandoutSection]) -> str:
    """The titles of the sections whose numbers are not this run's, as "A and B" ('' when there are none)."""
    return " and ".join(s.title for s in sections if not s.from_run)


def _settles_at(guesses: Sequence[int], final: int) -> int:
    layer = len(guesses)
    while layer > 0 and guesses[layer - 1] == final:
        layer -= 1
    return layer


def _size(count: int) -> str:
    return f"{count / 1024:,.1f} KiB" if count < 2**20 else f"{count / 2**20:,.2f} MiB"


def script_json(text: str) -> str:
    """JSON text made safe inside <script>: no "<", ">" or "&" can end the element or open a comment."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_handout(journey: Journey, sections: Sequence[HandoutSection], plotly_js: str,
                   overview: Mapping[str, str] | None = None, created: datetime | None = None) -> str:
    """The whole handout as one HTML document; ``plotly_js`` is the plotly.js bundle, inlined."""
    created = created or datetime.now(timezone.utc)
    esc = html.escape
    charts: list[str] = []
    parts = []
    for number, section in enumerate(sections, start=1):
        facts = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in section.facts)
        figures = []
        for figure in section.figures:
            charts.append(figure)
            figures.append(f'<div class="chart" id="chart-{len(charts) - 1}"></div>')
        literal = f"<pre>{esc(section.literal)}</pre>" if section.literal else ""
        parts.append(
            f'<section id="stage-{number}"><h2>{number}. {esc(section.title)}</h2><p>{esc(section.summary)}</p>'
            f'<table class="facts">{facts}</table>{literal}{"".join(figures)}</section>'
        )
    except_ = not_from_run(sections)
    except_ = f", except in {esc(except_)}: what the installed SDK and the Agents page do" if except_ else ""
    toc = "".join(f'<li><a href="#stage-{n}">{esc(s.title)}</a></li>' for n, s in enumerate(sections, start=1))
    summary = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in (overview or {}).items())
    data = script_json("[" + ",".join(charts) + "]")
    library = plotly_js.replace("</script", "<\\/script")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>LLM Request Lifecycle: one prompt's journey</title>
<style>{_STYLE}</style>
<script>{library}</script>
</head><body><main>
<h1>One prompt's journey through an LLM API call</h1>
<p class="meta">Model {esc(journey.model_name)} · made {esc(created.strftime("%Y-%m-%d %H:%M UTC"))} with LLM Request
Lifecycle. Every number below was measured on the real model for this prompt{except_}. This file works offline.</p>
<h3>The prompt</h3><pre>{esc(journey.input.prompt)}</pre>
<table class="facts">{summary}</table>
<nav><ol>{toc}</ol></nav>
{"".join(parts)}
</main>
<script>
const charts = {data};
charts.forEach((spec, i) => Plotly.newPlot("chart-" + i, spec.data, spec.layout,
  {{responsive: true, displaylogo: false}}));
</script>
</body></html>
"""


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Arial, sans-serif; color: #222; margin: 0; }
main { max-width: 1000px; margin: 0 auto; padding: 1.5rem; font-size: 18px; line-height: 1.5; }
h1 { font-size: 2rem; } h2 { border-top: 2px solid #0072B2; padding-top: 1rem; margin-top: 2.5rem; }
.meta { color: #555; }
pre { background: #f5f5f5; padding: .75rem; white-space: pre-wrap; word-break: break-word; font-size: 15px; }
table.facts { border-collapse: collapse; margin: .5rem 0 1rem; }
table.facts th { text-align: left; font-weight: 600; padding: .2rem 1.5rem .2rem 0; }
table.facts td { font-variant-numeric: tabular-nums; }
.chart { width: 100%; min-height: 360px; margin-bottom: 1rem; }
nav ol { columns: 2; }
"""
