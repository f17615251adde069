"""The sentences the pages state about one run, each chosen by the run's own numbers.

A page that says "mostly", "half", "small next to" or "one per step" states a fact about this
run; these functions take the numbers the fact is about and return the sentence that holds for
them, saying what does hold where the usual lesson does not. They are pure (numbers in, text
out, Markdown bold for the figures), so tests can put numbers on both sides of each threshold.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

# Plain fractions a share is read as, nearest first; "about" when within this many points of one.
FRACTIONS = (
    (1 / 10, "a tenth"), (1 / 5, "a fifth"), (1 / 4, "a quarter"), (1 / 3, "a third"), (2 / 5, "two fifths"),
    (1 / 2, "half"), (3 / 5, "three fifths"), (2 / 3, "two thirds"), (3 / 4, "three quarters"),
    (4 / 5, "four fifths"), (9 / 10, "nine tenths"),
)
ABOUT = 0.025
# A decode step's cache reads are "a small part" of its weight reads below this share.
SMALL_SHARE = 0.2
# A journey's prefill "was held up" when it took more than this many times the same prefill measured alone.
SLOWED = 2.0
# Two frames this close together (seconds) arrived together; their steps ended further apart than
# twice that gap when the reader delivered them late.
TOGETHER_SECONDS = 0.002


def _ms(seconds: float) -> str:
    """A duration as the pages write it: "237.3 ms"."""
    return f"{seconds * 1000:,.1f} ms"


def share_in_words(share: float) -> str:
    """A share (0..1) in words: "about half" only near 50%, "nearly all" near 100%, else the nearest fraction."""
    if share >= 0.97:
        return "nearly all"
    if share < 0.075:
        return "almost none"
    value, words = min(FRACTIONS, key=lambda f: abs(f[0] - share))
    if abs(value - share) <= ABOUT:
        return f"about {words}"
    return f"more than {words}" if share > value else f"less than {words}"


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
        return f"time to first token: mostly the prefill of {prompt_tokens} prompt tokens, {_ms(prefill)} ({share:.0%})"
    rest = max(0.0, ttft - setup - waited - prefill)
    parts = [(setup, "before the engine had the request"), (waited, "waiting in the engine's queue"),
             (rest, "choosing the first token and sending it")]
    said = [f"{_ms(seconds)} {what}" for seconds, what in parts if seconds >= 0.001]
    return (f"time to first token; the prefill of {prompt_tokens} prompt tokens was only {_ms(prefill)} of it "
            f"({share:.0%}), the rest {_and(said) if said else 'under a millisecond'}")


def probability_mass_sentence(top_probability: float, tokens_for_half: int) -> str:
    """Where half of the next-token probability sits: in the top token only when it holds half or more."""
    if tokens_for_half > 1:
        return f"Half of the probability sits in the top {tokens_for_half:,} tokens"
    words = share_in_words(top_probability)
    return f"{words[0].upper()}{words[1:]} of the probability ({top_probability:.1%}) sits in that one token"


def tokens_to_reach(probabilities: Sequence[float], share: float) -> tuple[int, float]:
    """The fewest most-likely tokens whose probabilities reach ``share``, and what they hold together."""
    held = 0.0
    for count, probability in enumerate(sorted(probabilities, reverse=True), start=1):
        held += probability
        if held >= share:
            return count, held
    return len(probabilities), held


def ninety_percent_sentence(tokens: int, held: float, vocabulary: int) -> str:
    """How few tokens hold 90% of the probability, with what they really hold and what the rest share."""
    rest = vocabulary - tokens
    if tokens == 1:
        return f"that token alone holds over 90%, and the other {rest:,} share the remaining {1 - held:.1%}"
    return (f"the top {tokens:,} together hold {held:.1%} (the fewest that reach 90%), and the other {rest:,} "
            f"share the remaining {1 - held:.1%}")


def prefill_in_ttft(ttft: float, prefill: float, measured_alone: float | None = None) -> str:
    """The prefill as the model's part of this run's time to first token, with its real share; where it took
    over ``SLOWED`` times the same prompt's prefill ``measured_alone`` (no cache), it says the run was held up."""
    if ttft <= 0:
        return "The prefill is the model's part of the time to first token."
    share = prefill / ttft
    rest = "" if share > 0.5 else " (the Streaming page says where the rest went)"
    slowed = ""
    if measured_alone and prefill > SLOWED * measured_alone:
        slowed = (f" That is {prefill / measured_alone:,.1f}x the {_ms(measured_alone)} this prompt's prefill took "
                  "measured alone just now: other work in the server held it up (a server that has just started is "
                  "still building what the pages inspect, and other visitors share the machine).")
    return (f"The prefill is the model's part of the time to first token: this run's answer had its first token "
            f"after **{_ms(ttft)}**, of which its prefill took {_ms(prefill)}, {share_in_words(share)}{rest}.{slowed}")


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
    compared = (f"at this prompt's {positions:,} positions the cache is **{_mib(cache)}** against "
                f"**{_mib(weight_bytes)}** "
                f"of weights read per step ({share:.0%})")
    if cache >= weight_bytes:
        return (f"Each step reads the whole cache as well as all the weights, and {compared}: past about "
                f"{cross:,} tokens reading the cache is the bigger part of every decode step.")
    size = "a small part of its work" if share < SMALL_SHARE else "already a sizeable part of its work"
    return (f"Each step reads the whole cache as well as all the weights: {compared}, {size}. The cache grows "
            f"by {cache_bytes_per_token / 1024:,.1f} KiB per token and {past}; from there on reading the cache "
            "is most of what a step reads.")


def _mib(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB"


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
                 f"{_ms(worst.step_seconds)} apart: the tokens were made one per step, but the server's reader "
                 "picked them up late and sent them together (delivery batching), so the gap before was longer.")
    return text


def pca_sentence(vectors: int, dims: int, top_two_share: float) -> str:
    """How much of the vectors' spread the two PCA directions show, and how many directions hold the rest."""
    rest = max(0, min(vectors - 1, dims) - 2)
    shown = (f"{vectors} vectors of {dims} numbers flattened onto the two directions along which they vary most "
             f"(PCA), which hold {top_two_share:.1%} of their spread.")
    if rest == 0:
        return shown + " With so few vectors these two directions hold all of it: the map is exact."
    where = "most of the spread" if top_two_share < 0.5 else "the rest of the spread"
    return (shown + f" Distances are only approximate: {where} is in the other {rest:,} direction"
            f"{'s' if rest > 1 else ''} ({vectors} points span at most {min(vectors - 1, dims):,}).")


def window_sentence(model_name: str, trained_positions: int) -> str:
    """What the trained window means: attention past it is possible, quality is not."""
    return (f"{model_name} was trained on up to {trained_positions:,} positions. Its attention can reach past them "
            "(nothing in the arithmetic stops it), but the answers get worse beyond what it was trained on, so this "
            f"app, like an API, refuses a request that needs more than {trained_positions:,}")


def engine_wait_sentence(waited: float, ahead: Sequence[str], jobs_ahead: int) -> str:
    """What the generation waited for in the engine: what was there when it arrived, never a guess."""
    if waited < 0.001:
        return ("The engine started on this prompt at once: nothing was ahead of it. With a whole class at the same "
                "moment, prompts wait for a place in the engine's batch (see Live calls).")
    held = [f"{count} {label} request{'s' if count > 1 else ''}" for label, count in Counter(ahead).most_common()]
    if jobs_ahead:
        held.append(f"{jobs_ahead} exclusive job{'s' if jobs_ahead > 1 else ''} (an inspection pass or a measurement "
                    "another page runs)")
    if not held:
        return (f"This prompt waited **{_ms(waited)}** for the engine's thread to take it up; nothing else was in "
                "the engine when it arrived.")
    return (f"This prompt **waited {_ms(waited)} for the engine** before the model started on it: when it arrived the "
            f"engine already held {_and(held)} (see Live calls).")


def _and(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def embedding_sentence(message_tokens: int, read_tokens: int, vocab: int, dims: int) -> str:
    """What the prompt enters the model as: its tokens, the chat template's, and one table row for each."""
    template = read_tokens - message_tokens
    read = (f"with the chat template's {template:,} more, the model reads **{read_tokens:,} tokens**" if template > 0
            else "the model reads exactly those")
    return (f"Your message became **{message_tokens:,} tokens**; {read}. Each token id picks one row of the "
            f"{vocab:,} x {dims} embedding table, so the prompt enters the model as {read_tokens:,} vectors of "
            f"**{dims} numbers** each.")


def overflow_demo_sentence(window: int, journey_window: int, example_messages: int | None, journey_messages: int) -> str:
    """How the truncation demo differs from the journey: its window, and whose history it truncates."""
    history = (f"an example history of {example_messages} messages instead of your {journey_messages}"
               if example_messages is not None else f"your own {journey_messages} earlier messages")
    size = ("the journey's own window" if window == journey_window
            else f"a {window:,}-token window where the journey has {journey_window:,}")
    return f"Not the journey's settings: {size}, and {history}. The journey itself is not truncated here."


def generation_sentence(tokens: int, prompt_tokens: int, prefill: float, decode: float, finish_reason: str,
                        max_tokens: int) -> str:
    """The Generation page's lesson: how many steps, the one prefill and the mean step, and why it stopped."""
    why = {
        "stop": "the model chose its end-of-turn token (finish_reason **stop**)",
        "length": f"it reached max_tokens = {max_tokens} (finish_reason **length**)",
    }.get(finish_reason, f"finish_reason **{finish_reason}**")
    unit = "token" if tokens == 1 else "tokens"
    return (f"The model wrote this answer **one token per step: {tokens} {unit}**, after one pass over the "
            f"**{prompt_tokens} prompt tokens** (the prefill, {_ms(prefill)}); each step took "
            f"**{_ms(decode / tokens)}** on average. It stopped because {why}.")


def kv_cache_sentence(prompt_tokens: int, prompt_bytes: int, bytes_per_token: int, ratio: int) -> str:
    """The KV-cache page's lesson: this prompt's cache, what each token adds, what grouped-query attention saves."""
    return (f"The model keeps a key and a value vector per layer and KV head for each of the prompt's "
            f"**{prompt_tokens} tokens**: **{cache_size(prompt_bytes)}**, and **{cache_size(bytes_per_token)}** "
            f"more per generated token. Sharing each K/V head among {ratio} query heads (grouped-query "
            f"attention) makes it {ratio}x smaller.")


def cache_size(count: int) -> str:
    """Bytes as the KV-cache page writes them: KiB with one decimal below a MiB, else MiB with two."""
    return f"{count / 1024:,.1f} KiB" if count < 2**20 else f"{count / 2**20:,.2f} MiB"


def mask_sentence(allowed: Sequence[int], overruled: int, vocabulary: int) -> str:
    """What the grammar mask did over one structured answer: how far it narrowed the steps, how many it
    forced, how often it overruled the model; and that nothing was narrowed when no step was (tool_choice
    "none": no grammar runs, so "the grammar mask let through 49,152 of 49,152" would invent one)."""
    if not allowed or min(allowed) >= vocabulary:
        return f"No step was narrowed: the model could take any of the {vocabulary:,} tokens at every step."
    low, high = min(allowed), max(allowed)
    forced = sum(1 for n in allowed if n == 1)
    span = (f"exactly **{low:,}**" if low == high else f"between **{low:,}** and **{high:,}**")
    return (f"At every step the grammar mask let through {span} of the {vocabulary:,} tokens; **{forced}** step{'s' * (forced != 1)} had exactly one allowed "
            f"token, and at **{overruled}** step{'s' * (overruled != 1)} the model's own favourite was masked out.")


def detokenized_sentence(tokens: int, token_bytes: int, waits: int, dropped: int, special: int, characters: int,
                         finish_reason: str, usage: dict) -> str:
    """The Detokenization page's lesson: the answer's ids, the bytes that became its content, the tokens whose
    bytes were held back, and the bytes of a character the answer stopped inside (never content: dropped).

    ``token_bytes`` are the bytes of the content tokens (special ones not counted), ``dropped`` the bytes
    still held after the last step: 47 bytes in 30 tokens cut off at max_tokens two bytes into a character
    make 45 bytes of content, not 47.
    """
    if not waits:
        held = "none of them split a character, so nothing had to be held back (the example below has some)"
    elif not dropped:
        held = (f"**{waits}** of them ended inside a character, so their bytes were **held back** until the next "
                "token completed it")
    else:
        held = (f"**{waits}** of them ended inside a character, so their bytes were **held back** until a later "
                f"token completed it; the answer stopped inside its last character, so those **{dropped} "
                f"byte{'s' * (dropped != 1)}** never became text and were dropped")
    left_out = (f"{special} special token{'s' * (special != 1)} (end of turn) {'was' if special == 1 else 'were'} left "
                "out of the content. " if special else "")
    return (f"The model never produces text: it produced **{tokens} token id{'s' * (tokens != 1)}**. Each id stands "
            f"for a run of bytes (**{token_bytes - dropped} bytes** of content in all), and the bytes are UTF-8 text "
            f"only once a whole character is there: {held}. {left_out}"
            f"The text became the `content` of the final response: **{characters:,} characters**, "
            f"`finish_reason` **{finish_reason}**, and usage of **{usage['total_tokens']} tokens** "
            f"({usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion).")
