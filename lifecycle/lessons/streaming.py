"""The Streaming page's lessons: what the time to first token was made of, and what the gaps between
frames were, each chosen by the run's own numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.lessons.words import and_joined, milliseconds, ms
from lifecycle.stages.streaming import StreamMetrics

# Two frames this close together (seconds) arrived together; their steps ended further apart than
# twice that gap when the reader delivered them late.
TOGETHER_SECONDS = 0.002


def ttft_sentence(ttft: float, prompt_tokens: int, setup: float, waited: float, prefill: float) -> str:
    """What the time to first token was made of: "mostly the prefill" only when the prefill is over half of it.

    ``setup`` is the server's time before the engine had the request (its checks; a process's first
    call also builds the engine), ``waited`` its time in the
    engine's queue, ``prefill`` the prompt through the model; the rest is choosing and sending the token.
    """
    if ttft <= 0:
        return "time to first token"
    share = prefill / ttft
    if share > 0.5:
        return (f"time to first token: mostly the prefill of {prompt_tokens:,} prompt tokens, "
                f"{milliseconds(prefill)} ({share:.0%})")
    rest = max(0.0, ttft - setup - waited - prefill)
    parts = [(setup, "before the engine had the request"), (waited, "waiting in the engine's queue"),
             (rest, "choosing the first token and sending it")]
    said = [f"{milliseconds(seconds)} {what}" for seconds, what in parts if seconds >= 0.001]
    return (f"time to first token; the prefill of {prompt_tokens:,} prompt tokens was only {milliseconds(prefill)} of it "
            f"({share:.0%}), the rest {and_joined(said) if said else 'under a millisecond'}")


@dataclass(frozen=True)
class Gap:
    """The gap before one content frame: on the wire, between the decode steps behind it, and the tokens it carries."""

    seconds: float  # between this frame and the previous content frame
    step_seconds: float  # between the ends of the decode steps that made them
    tokens: int  # tokens the frame carries (more than one when some were held back)
    held_character: bool  # the earlier of them were held as an unfinished character

    @property
    def delivered_together(self) -> bool:
        """The frame left right after the previous one although its step ended later: delivered in a batch."""
        return self.seconds < TOGETHER_SECONDS and self.step_seconds > 2 * TOGETHER_SECONDS


def stream_gaps(content_at: Sequence[float], steps: Sequence) -> list[Gap] | None:
    """The gaps between content frames, each beside the time between the decode steps behind its two frames.

    ``steps`` are the generation's steps (``seconds`` from the previous step's end to this one's,
    ``delta`` the text it released, ``held`` an unfinished character's bytes). One content frame
    leaves per step that released text; None when the frames do not match the steps that way.
    """
    releasing = [i for i, step in enumerate(steps) if step.delta]
    if len(releasing) != len(content_at):
        return None
    gaps = []
    for n in range(1, len(releasing)):
        behind = steps[releasing[n - 1] + 1:releasing[n] + 1]
        gaps.append(Gap(
            seconds=content_at[n] - content_at[n - 1],
            step_seconds=sum(step.seconds for step in behind),
            tokens=len(behind),
            held_character=any(step.held for step in behind[:-1]),
        ))
    return gaps


def gaps_sentence(gaps: list[Gap] | None) -> str:
    """What the gaps between tokens were in this run: one decode step each, or what else happened."""
    base = ("Each gap is one decode step of the model (one token through all layers, with the KV cache) plus the "
            "time to turn it into a frame")
    if not gaps:
        return base + "."
    together = [g for g in gaps if g.delivered_together]
    multi = [g for g in gaps if g.tokens > 1]
    if not together and not multi:
        return base + f": here all {len(gaps)} gaps were one step each."
    text = base + ", when the frame leaves as soon as its step ends."
    if multi:
        characters = sum(g.held_character for g in multi)
        why = ("a character spans them, and its frame waits for its last byte" if characters == len(multi) else
               "their text was held back (an unfinished character, or text that might begin a stop sequence)")
        text += (f" {len(multi)} frame{'s' if len(multi) > 1 else ''} carried more than one token, so "
                 f"{'their gaps' if len(multi) > 1 else 'its gap'} spanned several steps: {why}.")
    if together:
        worst = max(together, key=lambda g: g.step_seconds)
        text += (f" {len(together)} frame{'s' if len(together) > 1 else ''} left less than "
                 f"{TOGETHER_SECONDS * 1000:.0f} ms after the previous one although their decode steps ended up to "
                 f"{milliseconds(worst.step_seconds)} apart: the tokens were made one per step, but the server's "
                 "reader picked them up late and sent them together (delivery batching), so the gap before was longer.")
    return text


def streaming_lesson(events: int, contents: int, usage_chunk: bool, metrics: StreamMetrics, prompt_tokens: int,
                     setup: float, waited: float, prefill: float) -> str:
    """The Streaming page's lesson: the events the answer came as, when the first text arrived and what that
    time was made of (``ttft_sentence``), the mean gap and the rate after it, and the non-streaming wait."""
    made_of = ttft_sentence(metrics.ttft, prompt_tokens, setup, waited, prefill)
    gaps = metrics.inter_token
    gap = ms(sum(gaps) / len(gaps)) if gaps else "n/a"
    return (
        f"With `stream: true` the answer came as **{events} server-sent events**, each a `data:` line sent the "
        f"moment it existed: a role chunk, **{contents} content deltas**, a finish chunk"
        f"{', a usage chunk' if usage_chunk else ''} and `[DONE]`. The first text reached the client "
        f"after **{ms(metrics.ttft)}** ({made_of}), then a new piece every **{gap}** on average "
        f"(**{metrics.tokens_per_second:,.1f} tokens/s**), while a non-streaming client waited "
        f"**{ms(metrics.total_seconds)}** for anything at all."
    )
