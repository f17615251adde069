"""A remote engine: generation on an OpenAI-compatible server that returns logprobs.

When a class outgrows one machine, the tokens should come from a real serving engine (vLLM,
llama.cpp's server, or this app's own /v1 on a bigger machine), not from ours. Set
``LIFECYCLE_ENGINE_URL`` (its ``/v1`` base URL; ``LIFECYCLE_ENGINE_KEY`` and
``LIFECYCLE_ENGINE_MODEL`` if it needs a key or names the model differently) and the journey's
generation streams from there. The remote samples; every streamed token comes back with its
logprob, UTF-8 bytes (or, where the server sends ``bytes: null`` as llama.cpp's does, a text
that is exactly them) and top alternatives, and becomes the same ``GenerationStep`` the local
engine produces, so the Generation, Streaming and Detokenization pages draw it unchanged. The
pages that need the model's insides (embeddings, attention, logit lens, next-token
distribution) still run the local weights, which must be the same model: a token whose bytes the
local vocabulary does not have is refused with a clear error.

The remote's logprobs list the tokens of the content, so its steps end at the last of them (this
app's /v1 and llama.cpp's server send no entry for the end-of-sequence token that stopped it).
The remote reports the model's own probabilities (before sampling), so a step's probability is
that one; the Generation page's branches (forced tokens) and the Streaming page's live run stay
local, since a chat API cannot continue from forced tokens.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import ALTERNATIVES, TOP_LOGPROBS, GenerationStep, TokenLogprob
from lifecycle.stages.sampling import TokenCandidate
from lifecycle.stages.vocabulary import TokenBytes, token_bytes, token_display

URL_ENV, KEY_ENV, MODEL_ENV = "LIFECYCLE_ENGINE_URL", "LIFECYCLE_ENGINE_KEY", "LIFECYCLE_ENGINE_MODEL"
TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class RemoteEngine:
    """An OpenAI-compatible server generating for this app; ``base_url`` ends in /v1."""

    base_url: str
    api_key: str | None = None
    model: str | None = None  # None: the local model's name
    timeout: float = TIMEOUT_SECONDS

    def generate_steps(self, loaded, payload: Mapping, cancelled: Callable[[], bool] | None = None,
                       timings: dict | None = None) -> Iterator[GenerationStep]:
        """Stream the chat-completions request ``payload`` from the remote; yield one step per token.

        ``timings`` receives "prefill_seconds" (request to first token, network included),
        "waited_seconds" (0: the remote's queue is not visible), and "cached_tokens" and
        "prompt_tokens" (the remote's count of the prompt) when its usage reports them.
        """
        body = {**payload, "model": self.model or payload.get("model"), "stream": True, "logprobs": True,
                "top_logprobs": TOP_LOGPROBS, "stream_options": {"include_usage": True}}
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.base_url.rstrip("/") + "/chat/completions"
        reader = _StepReader(token_bytes(loaded), url)
        started = time.perf_counter()
        import httpx  # here, not at the top: the app imports this module at start, and httpx costs ~0.1 s

        try:
            with httpx.stream("POST", url, json=body, headers=headers,
                              timeout=httpx.Timeout(self.timeout, connect=10)) as reply:
                if reply.status_code != 200:
                    raise LifecycleError(f"The engine at {url[:200]} answered {reply.status_code}: "
                                         f"{_message(reply.read())}", param="engine")
                for data in _sse_data(reply.iter_lines()):
                    if cancelled is not None and cancelled():
                        return
                    yield from reader.feed(data, started, timings)
        except httpx.HTTPError as error:
            raise LifecycleError(f"The engine at {url[:200]} failed: {type(error).__name__}: {str(error)[:200]}",
                                 param="engine") from error
        yield from reader.close()


class _StepReader:
    """Turns the remote's chunks into GenerationSteps, one per token in ``logprobs.content``.

    A chunk's content delta belongs to the last token it carries (a character split over tokens
    arrives with the token that completes it); the finish reason marks the last step. Steps are
    released one chunk late, so the final one can carry ``finished``.
    """

    def __init__(self, vocabulary: TokenBytes, url: str) -> None:
        self.vocabulary = vocabulary
        self.ids = {}
        for token_id, data in enumerate(vocabulary.table):
            self.ids.setdefault(data, token_id)
        self.url = url
        self.held: list[GenerationStep] = []
        self.count = 0
        self.last_at: float | None = None
        self.finish_reason: str | None = None
        self.pending_delta = ""

    def feed(self, data: dict, started: float, timings: dict | None) -> Iterator[GenerationStep]:
        if "error" in data:
            raise LifecycleError(f"The engine at {self.url[:200]} failed: {str(data['error'])[:300]}", param="engine")
        usage = data.get("usage") or {}
        if timings is not None and isinstance(usage.get("prompt_tokens"), int):
            timings["prompt_tokens"] = usage["prompt_tokens"]  # the remote's own count: did it read our prompt?
        if timings is not None and (usage.get("prompt_tokens_details") or {}).get("cached_tokens") is not None:
            timings["cached_tokens"] = int(usage["prompt_tokens_details"]["cached_tokens"])
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            now = time.perf_counter()
            entries = (choice.get("logprobs") or {}).get("content") or []
            delta = (choice.get("delta") or {}).get("content") or ""
            if delta and not entries and not self.held:
                self.pending_delta += delta  # text before any token (should not happen): keep it for the first
            if entries:
                yield from self._release()
                if timings is not None and self.count == 0:
                    timings.update(prefill_seconds=now - started, waited_seconds=0.0, submitted_at=started,
                                   started_at=started)
                self._take(entries, self.pending_delta + delta, now if self.last_at is None else self.last_at, now)
                self.pending_delta = ""
                self.last_at = now
            elif delta and self.held:
                self.held[-1].delta += delta
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def close(self) -> Iterator[GenerationStep]:
        if self.count == 0 and self.finish_reason is None:
            raise LifecycleError(f"The engine at {self.url[:200]} sent no tokens.", param="engine")
        if self.count == 0:
            raise LifecycleError(f"The engine at {self.url[:200]} returned no logprobs: this app needs a server that "
                                 "returns them (logprobs: true), as vLLM, llama.cpp's server and this app's /v1 do.",
                                 param="engine")
        if self.held:
            self.held[-1].finished = self.finish_reason or "stop"
        yield from self._release()

    def _release(self) -> Iterator[GenerationStep]:
        released, self.held = self.held, []
        yield from released

    def _take(self, entries: list, delta: str, previous: float, now: float) -> None:
        for position, entry in enumerate(entries):
            data = self._token_bytes(entry)
            token_id = self._id(data, entry)
            logprob = _logprob(entry.get("logprob"))
            probability = math.exp(logprob)  # exp(-inf) = 0
            ranked = [(_entry_bytes(a), _logprob(a.get("logprob"))) for a in entry.get("top_logprobs") or []]
            self.held.append(GenerationStep(
                index=self.count,
                token_id=token_id,
                text=token_display(data),
                probability=probability,
                alternatives=[TokenCandidate(self.ids.get(b, -1), token_display(b), math.exp(lp), lp, rank)
                              for rank, (b, lp) in enumerate(ranked[:ALTERNATIVES], start=1)],
                seconds=(now - previous) / len(entries),
                forced=False,
                delta=delta if position == len(entries) - 1 else "",
                token_bytes=data,
                base_probability=probability,
                logprob=logprob,
                top_logprobs=[TokenLogprob(self.ids.get(b, -1), b, lp) for b, lp in ranked],
                made_at=now,
            ))
            self.count += 1

    def _token_bytes(self, entry: Mapping) -> bytes:
        """A generated token's bytes: reported, or (``bytes: null``, as llama.cpp's server sends) its
        text's UTF-8, unless that text cannot say which bytes it was (empty, or U+FFFD: a piece of a
        character the server decoded away), which is refused rather than guessed."""
        if not _reported_bytes(entry):
            token = entry.get("token")
            if not isinstance(token, str) or not token or "\ufffd" in token:
                raise LifecycleError(
                    f"The engine at {self.url[:200]} sent a token with \"bytes\": null and the text "
                    f"{str(token)[:40]!r}, which does not say which bytes it was (part of a character split over "
                    "tokens): this app needs every token's bytes, or a text that is exactly them.", param="engine")
        return _entry_bytes(entry)

    def _id(self, data: bytes, entry: Mapping) -> int:
        token_id = self.ids.get(data)
        if token_id is None:
            raise LifecycleError(
                f"The engine at {self.url[:200]} produced the token {str(entry.get('token'))[:40]!r}, which this app's "
                "model does not have: the remote must serve the same model (same vocabulary) as the local pages.",
                param="engine",
            )
        return token_id


def _reported_bytes(entry: Mapping) -> bool:
    raw = entry.get("bytes")
    return isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw)


def _entry_bytes(entry: Mapping) -> bytes:
    """An entry's bytes: ``bytes`` when the server sent them, else its ``token`` text as UTF-8."""
    if _reported_bytes(entry):
        return bytes(entry["bytes"])
    return str(entry.get("token", "")).encode("utf-8")


def _logprob(value: object) -> float:
    """A reported logprob; OpenAI's floor (-9999) and anything unusable mean probability 0."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= -9999:
        return -math.inf
    return min(float(value), 0.0)


def _sse_data(lines: Iterator[str]) -> Iterator[dict]:
    for line in lines:
        if not line.startswith("data:"):
            continue
        text = line[5:].strip()
        if text == "[DONE]":
            return
        try:
            data = json.loads(text)
        except ValueError as error:
            raise LifecycleError(f"The engine sent a frame that is not JSON: {text[:80]!r}", param="engine") from error
        if isinstance(data, dict):
            yield data


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", errors="replace")


def remote_engine(environ: Mapping[str, str] = os.environ) -> RemoteEngine | None:
    """The remote engine ``LIFECYCLE_ENGINE_URL`` names, or None to generate locally."""
    url = environ.get(URL_ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise LifecycleError(f"{URL_ENV} must be an http(s) URL ending in /v1, got {url[:80]!r}", param=URL_ENV)
    return RemoteEngine(url, environ.get(KEY_ENV) or None, environ.get(MODEL_ENV) or None)
