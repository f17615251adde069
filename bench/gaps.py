"""Inspection passes against a live stream: the worst gap between two streamed tokens of an API call
while ten sessions open the Attention page for long prompts (ten inspection passes of ~900 tokens); and a call on
a kept-alive connection, which must not wait for the client's delayed ACK.

The inspection pass runs one decoder layer per slice between the engine's steps, so a stream should wait
at most about one prefill chunk longer than it does alone. Measured on ``streamlit run app.py`` as the
README starts it, with the official openai SDK as the client, against one prefill chunk's time measured
on the same server by the same client (a chunk-long prompt's first token against a short one's).

    python -m bench.gaps
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import threading
import time

from bench.app_server import AppServer
from bench.report import check, heading, row
from bench.sessions import room

PASSES = 10
PASS_WORDS = 700  # ~900 tokens once templated: below the journey's 1,024-token limit
STREAM_TOKENS = 60
KEEP_ALIVE_CALLS = 20
KEEP_ALIVE_TARGET_MS = 20  # Nagle's algorithm left on costs ~40 ms a call on Linux


def long_prompts(count: int) -> list[str]:
    """``count`` distinct long prompts (no two share a prefix the prefix cache could serve)."""
    words = ("river", "stone", "cloud", "lamp", "forest", "window", "bridge", "garden", "harbor", "meadow")
    return [f"Student {i} pasted this: " + " ".join(words[(i + k) % len(words)] for k in range(PASS_WORDS))
            for i in range(count)]


def stream_gaps(base_url: str, key: str) -> list[float]:
    """Seconds between consecutive content chunks of one streamed chat completion (greedy)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=600)
    stream = client.chat.completions.create(
        model=client.models.list().data[0].id, stream=True, temperature=0, max_tokens=STREAM_TOKENS,
        messages=[{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}])
    arrivals = [time.perf_counter() for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
    return [b - a for a, b in zip(arrivals, arrivals[1:])]


def first_token_seconds(base_url: str, key: str, prompt: str) -> float:
    """Seconds from sending a streamed call to its first content chunk (one token asked for)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=600)
    started = time.perf_counter()
    stream = client.chat.completions.create(model=client.models.list().data[0].id, stream=True, temperature=0,
                                            max_tokens=1, messages=[{"role": "user", "content": prompt}])
    first = next((time.perf_counter() for chunk in stream if chunk.choices and chunk.choices[0].delta.content),
                 time.perf_counter())
    return first - started


def prefill_chunk_seconds(base_url: str, key: str) -> float:
    """One prefill chunk's time on this server, as its clients see it: the first-token time of a prompt
    one chunk long (the engine's default chunk, 256 tokens) less that of a short prompt."""
    words = long_prompts(1)[0].split()[:200]  # ~256 tokens with the chat template
    short = first_token_seconds(base_url, key, "Hi.")
    return max(0.0, first_token_seconds(base_url, key, "Read this: " + " ".join(words)) - short)


def keep_alive_call_seconds(base_url: str, key: str, calls: int = KEEP_ALIVE_CALLS) -> float:
    """The median time of a ``GET /v1/models`` after the first on one openai client (one keep-alive connection):
    with Nagle's algorithm left on, each waits ~40 ms for the client's delayed ACK (lifecycle/api/nodelay.py)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=60)
    client.models.list()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        client.models.list()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def gaps_part(_loaded=None) -> None:
    key = "sk-bench-" + secrets.token_hex(12)
    with AppServer({"LIFECYCLE_API_KEYS": f"bench:{key}"}) as server:
        # As a class arrives: in the ~3 s between /health's 200 and its pages "ready", the loader builds the pages'
        # model and imports their code, and a stream then stalled once for 376 ms (15-22 ms once they were ready).
        server.wait_for_pages()
        keep_alive = keep_alive_call_seconds(server.url, key)
        chunk = prefill_chunk_seconds(server.url, key)
        alone = stream_gaps(server.url, key)
        visits: list = []
        pages = threading.Thread(target=lambda: visits.extend(asyncio.run(
            room(server.url, "attention", long_prompts(PASSES), {"max_tokens": 1}))), daemon=True)
        pages.start()
        time.sleep(2.0)  # the pages have asked for their passes; the stream arrives among them
        during = stream_gaps(server.url, key)
        pages.join()
    problems = [p for v in visits for p in (*v.exceptions, *v.errors)]
    row(f"a call on a kept-alive connection (GET /v1/models, ms, median of {KEEP_ALIVE_CALLS})",
        f"{keep_alive * 1000:.1f}", f"< {KEEP_ALIVE_TARGET_MS} ms (no delayed-ACK wait)",
        check(keep_alive * 1000 < KEEP_ALIVE_TARGET_MS))
    row("stream alone: worst gap between two tokens (ms)", f"{max(alone) * 1000:.0f}")
    row(f"with {PASSES} inspection passes: worst gap (ms)", f"{max(during) * 1000:.0f}",
        f"<= alone + 1 chunk ({(max(alone) + chunk) * 1000:.0f})", check(max(during) <= max(alone) + chunk))
    row("  one prefill chunk on this machine (ms)", f"{chunk * 1000:.0f}")
    row(f"  Attention pages finished, of {PASSES}", f"{sum(v.finished for v in visits)}", f"{PASSES}, no error",
        check(sum(v.finished for v in visits) == PASSES and not problems))


def main() -> None:
    heading("inspection passes beside a stream")
    gaps_part()


if __name__ == "__main__":
    main()
