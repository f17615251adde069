"""One call as its client lives it: where the time went between the server taking the prompt and the last SSE event.

The clock is the stream's own (0 = the generation asked the engine for the prompt, the origin of
every event's ``at`` on the Streaming page), so the spans follow each other without a hole and
the last one ends at the last event: the waterfall's total is the stream's last event time.

- "server setup": from 0 until the engine got the request (the server's own checks and
  sampler; a process's first call also builds the engine);
- "engine queue": until the engine began the prompt's prefill (its queue, and whatever
  it ran first);
- "prefill": the prompt through the model, as the engine timed it;
- "prefill hand-off": the engine stores the prompt's keys and values in its prefix cache and
  hands the logits over;
- "decode k": step k's own time, from the end of step k-1 to the moment its token was chosen
  (decode 1 only samples from the prefill's logits; every later step runs the model on one new
  token);
- "last frames": from the last chosen token to the last event (finish, usage, ``[DONE]``).

The app's inspection pass is not part of the call and never appears here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.stages.vocabulary import show_token

# Short enough for one line of a chart's axis (charts.theme.wrap_label breaks at 16 characters).
SETUP = "server setup"
WAIT = "engine queue"
HANDOVER = "prefill hand-off"
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


def call_spans(started: float, submitted_at: float, engine_started_at: float, prefill_seconds: float,
               steps: Sequence, last_event_at: float) -> list[Span]:
    """The call's spans from 0 to ``last_event_at``.

    Times are ``time.perf_counter()`` readings: ``started`` the stream's origin, ``submitted_at``
    when the engine got the request, ``engine_started_at`` when its prefill began; each of
    ``steps`` carries ``made_at`` (when its token was chosen), ``seconds`` (its own time),
    ``index`` and ``text``.
    """
    submitted = max(0.0, submitted_at - started)
    prefill_start = max(submitted, engine_started_at - started)
    prefill_end = prefill_start + prefill_seconds
    spans = [Span(SETUP, 0.0, submitted, "the server's checks and sampler"),
             Span(WAIT, submitted, prefill_start - submitted), Span("prefill", prefill_start, prefill_seconds)]
    previous = prefill_end
    if steps:  # the engine keeps the prompt's keys and values, then hands over the logits
        first_started = max(prefill_end, steps[0].made_at - steps[0].seconds - started)
        spans.append(Span(HANDOVER, prefill_end, first_started - prefill_end,
                          "the engine stores the prompt in its prefix cache and hands over the logits"))
        previous = first_started
    for step in steps:
        end = max(previous, step.made_at - started)
        spans.append(Span(f"decode {step.index + 1}", previous, end - previous, show_token(step.text)))
        previous = end
    spans.append(Span(LAST_FRAMES, previous, max(0.0, last_event_at - previous),
                      "the finish chunk, any usage chunk and [DONE] reach the client"))
    return spans
