"""One call as its client lives it: where the time went between the server taking the prompt and the last SSE event.

The clock is the stream's own (0 = the generation asked the engine for the prompt, the origin of
every event's ``at`` on the Streaming page), so the spans follow each other without a hole and
the last one ends at the last event: the waterfall's total is the stream's last event time.

- "waiting for the engine": from 0 until the engine started the prompt's prefill (its queue, and
  whatever it ran first);
- "prefill": the prompt through the model, ending where the first step's sampling began;
- "decode k": from the end of step k-1 to the moment step k's token was chosen (decode 1 only
  samples from the prefill's logits; every later step runs the model on one new token);
- "last frames": from the last chosen token to the last event (finish, usage, ``[DONE]``).

The app's inspection pass is not part of the call and never appears here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.vocabulary import show_token

WAIT = "waiting for the engine"
LAST_FRAMES = "last frames"


@dataclass(frozen=True)
class Span:
    """One stretch of the call on the stream's clock (seconds)."""

    stage: str
    start: float
    seconds: float
    detail: str = ""

    @property
    def end(self) -> float:
        return self.start + self.seconds


def call_spans(started: float, prefill_seconds: float, steps: Sequence, last_event_at: float) -> list[Span]:
    """The call's spans from 0 to ``last_event_at``.

    ``started`` is the stream's origin (``time.perf_counter()``); each of ``steps`` carries
    ``made_at`` (perf_counter when its token was chosen), ``seconds``, ``index`` and ``text``.
    """
    ends = [step.made_at - started for step in steps]
    prefill_end = (ends[0] - steps[0].seconds) if steps else min(prefill_seconds, last_event_at)
    prefill_start = max(0.0, prefill_end - prefill_seconds)
    spans = [Span(WAIT, 0.0, prefill_start), Span("prefill", prefill_start, prefill_end - prefill_start)]
    previous = prefill_end
    for step, end in zip(steps, ends):
        spans.append(Span(f"decode {step.index + 1}", previous, max(0.0, end - previous), show_token(step.text)))
        previous = max(previous, end)
    spans.append(Span(LAST_FRAMES, previous, max(0.0, last_event_at - previous),
                      "the finish chunk, any usage chunk and [DONE] reach the client"))
    return spans

