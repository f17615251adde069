"""The KV cache page's lessons: this prompt's cache, what it costs a decode step next to the weights, and
the prefill's part of the time to first token."""

from __future__ import annotations

import math
from collections.abc import Sequence

from lifecycle.lessons.words import cache_size, mib, milliseconds, share_in_words
from lifecycle.stages.kv_cache import LatencyPoint, point_for

# A decode step's cache reads are "a small part" of its weight reads below this share.
SMALL_SHARE = 0.2
# A journey's prefill "was held up" when it took more than this many times the same prefill measured alone.
SLOWED = 2.0


def kv_cache_sentence(prompt_tokens: int, prompt_bytes: int, bytes_per_token: int, ratio: int) -> str:
    """The KV-cache page's lesson: this prompt's cache, what each token adds, what grouped-query attention saves."""
    return (f"The model keeps a key and a value vector per layer and KV head for each of the prompt's "
            f"**{prompt_tokens:,} tokens**: **{cache_size(prompt_bytes)}**, and **{cache_size(bytes_per_token)}** "
            f"more per generated token. Sharing each K/V head among {ratio} query heads (grouped-query "
            f"attention) makes it {ratio}x smaller.")


def prefill_in_ttft(ttft: float, prefill: float, measured_alone: float | None = None) -> str:
    """The prefill as the model's part of this run's time to first token, with its real share; where it took
    over ``SLOWED`` times the same prompt's prefill ``measured_alone`` (no cache), it says the run was held up."""
    if ttft <= 0:
        return "The prefill is the model's part of the time to first token."
    share = prefill / ttft
    rest = "" if share > 0.5 else " (the Streaming page says where the rest went)"
    slowed = ""
    if measured_alone and prefill > SLOWED * measured_alone:
        slowed = (f" That is {prefill / measured_alone:,.1f}x the {milliseconds(measured_alone)} this prompt's "
                  "prefill took measured alone just now: other work in the server held it up (a server that has just "
                  "started is still building what the pages inspect, and other visitors share the machine).")
    return (f"The prefill is the model's part of the time to first token: this run's answer had its first token "
            f"after **{milliseconds(ttft)}**, of which its prefill took {milliseconds(prefill)}, "
            f"{share_in_words(share)}{rest}.{slowed}")


def latency_sentence(points: Sequence[LatencyPoint], own_tokens: int, in_ttft: str) -> str:
    """The latency sweep in words: the prefill at its shortest and longest lengths and at this prompt's
    (``own_tokens``, one of the points), ``in_ttft`` (the prefill's part of this run's first token, from
    ``prefill_in_ttft``), then a decode step at both ends and how much each of the two grew."""
    short, long = points[0], points[-1]
    mine = point_for(points, own_tokens)
    return (f"Prefill runs all prompt tokens through the model at once, so its time grows with the prompt: "
            f"{short.prefill_seconds * 1000:,.0f} ms for {short.prompt_tokens:,} tokens, "
            f"{long.prefill_seconds * 1000:,.0f} ms for {long.prompt_tokens:,} (this prompt, {own_tokens:,} tokens: "
            f"{mine.prefill_seconds * 1000:,.0f} ms). {in_ttft} "
            f"A decode step runs one new token against the cache: {short.decode_fastest * 1000:,.0f} ms after "
            f"{short.prompt_tokens:,} tokens, {long.decode_fastest * 1000:,.0f} ms after {long.prompt_tokens:,} "
            f"({long.decode_fastest / short.decode_fastest:,.1f}x, against "
            f"{long.prefill_seconds / short.prefill_seconds:,.1f}x for prefill). That is the inter-token latency.")


def crossover_tokens(weight_bytes: int, cache_bytes_per_token: int) -> int:
    """The prompt length from which a decode step reads more cache than weights."""
    return math.ceil(weight_bytes / cache_bytes_per_token)


def cache_against_weights(positions: int, cache_bytes_per_token: int, weight_bytes: int, window: int) -> str:
    """What a decode step reads at ``positions``: the whole cache and all the weights, compared by bytes."""
    cache = positions * cache_bytes_per_token
    cross = crossover_tokens(weight_bytes, cache_bytes_per_token)
    share = cache / weight_bytes
    past = (f"passes the weights at about **{cross:,} tokens**" if cross <= window else
            f"stays below them even for the full {window:,}-token window (it would pass them at {cross:,})")
    compared = (f"at this prompt's {positions:,} positions the cache is **{mib(cache)}** against "
                f"**{mib(weight_bytes)}** "
                f"of weights read per step ({share:.0%})")
    if cache >= weight_bytes:
        return (f"Each step reads the whole cache as well as all the weights, and {compared}: past about "
                f"{cross:,} tokens reading the cache is the bigger part of every decode step.")
    size = "a small part of its work" if share < SMALL_SHARE else "already a sizeable part of its work"
    return (f"Each step reads the whole cache as well as all the weights: {compared}, {size}. The cache grows "
            f"by {cache_bytes_per_token / 1024:,.1f} KiB per token and {past}; from there on reading the cache "
            "is most of what a step reads.")
