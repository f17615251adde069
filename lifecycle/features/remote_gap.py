"""How far a remote engine's first step is from the local model's prefill on the same prompt.

With ``LIFECYCLE_ENGINE_URL`` set, the Generation, Streaming and Detokenization pages show the
remote's tokens while the Next token and Sampling pages show the local model's distribution. The
two are one journey only if they agree: this compares the remote's first-step ``top_logprobs``
with the local probabilities of the same tokens and says the measured gap in one sentence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lifecycle.stages.generation import TokenLogprob
from lifecycle.stages.vocabulary import show_token

LOCAL_TOP = 20  # the local tokens besides the remote's that a comparison holds (the local top is among them)

# Servers round logprobs (this app's /v1 to 6 decimals, others to float32): a gap below this many
# percentage points is rounding, not a different computation.
ROUNDING_POINTS = 0.1


@dataclass(frozen=True)
class FirstStepGap:
    """The remote's first-step probabilities against the local prefill's, token by token."""

    remote_top: bytes
    local_top: bytes
    max_points: float  # the largest |remote - local| over the remote's listed tokens, in percentage points
    widest: bytes  # the token with that gap
    compared: int  # how many of the remote's tokens were compared
    remote_prompt_tokens: int | None  # what the remote's usage counted
    local_prompt_tokens: int

    @property
    def top_matches(self) -> bool:
        return self.remote_top == self.local_top

    @property
    def same_prompt_length(self) -> bool | None:
        if self.remote_prompt_tokens is None:
            return None
        return self.remote_prompt_tokens == self.local_prompt_tokens

    @property
    def beyond_rounding(self) -> bool:
        return not self.top_matches or self.max_points >= ROUNDING_POINTS or self.same_prompt_length is False

    def sentence(self) -> str:
        """What a page showing the remote's tokens says about them, with the measured numbers."""
        remote, local = show_token(self.remote_top), show_token(self.local_top)
        if not self.beyond_rounding:
            return (f"The remote engine's first step matches this app's model: the same top token ({remote}) and "
                    f"probabilities within {self.max_points:.2f} points over its {self.compared} listed tokens.")
        top = (f"the remote's top token ({remote}) matches this app's model" if self.top_matches else
               f"the remote's top token is {remote}, this app's model's is {local}")
        gap = (f"its probabilities differ by up to {self.max_points:.1f} points (on {show_token(self.widest)}, "
               f"over its {self.compared} listed tokens)")
        if self.same_prompt_length is False:
            cause = (f"it counted {self.remote_prompt_tokens} prompt tokens against this app's "
                     f"{self.local_prompt_tokens}: it renders another prompt")
        elif self.same_prompt_length:
            cause = (f"it read the same {self.local_prompt_tokens} prompt tokens, so its arithmetic differs "
                     "(its kernels quantise differently)")
        else:
            cause = "it did not report its prompt tokens, so whether it read the same prompt is unknown"
        return (f"These tokens come from the remote engine, not the model the Next token and Sampling pages run: "
                f"{top}; {gap}; {cause}.")


def first_step_gap(remote: Sequence[tuple[bytes, float]], local: Mapping[bytes, float], *,
                   local_prompt_tokens: int, remote_prompt_tokens: int | None = None) -> FirstStepGap | None:
    """Compare the remote's first-step ``(token bytes, logprob)`` list, most likely first, with
    ``local`` (token bytes to the local prefill's probability, holding at least the local top token
    and every token the remote listed); None when the remote listed nothing."""
    if not remote or not local:
        return None
    gaps = [(abs(math.exp(logprob) - local.get(data, 0.0)) * 100, data) for data, logprob in remote]
    points, widest = max(gaps, key=lambda gap: gap[0])
    return FirstStepGap(
        remote_top=remote[0][0],
        local_top=max(local, key=local.__getitem__),
        max_points=points,
        widest=widest,
        compared=len(remote),
        remote_prompt_tokens=remote_prompt_tokens,
        local_prompt_tokens=local_prompt_tokens,
    )


def remote_first_step_gap(first: Sequence[TokenLogprob], probs: np.ndarray, table: Sequence[bytes], *,
                          local_prompt_tokens: int, remote_prompt_tokens: int | None) -> FirstStepGap | None:
    """``first_step_gap`` for the remote's first step's ``top_logprobs`` and the local prefill's
    probabilities over the vocabulary (``probs``, indexed like ``table``, the vocabulary's bytes)."""
    ids = np.argsort(-probs, kind="stable")[:LOCAL_TOP].tolist()
    ids += [entry.token_id for entry in first if 0 <= entry.token_id < len(probs)]
    local = {table[i]: float(probs[i]) for i in ids}
    return first_step_gap([(entry.token_bytes, entry.logprob) for entry in first], local,
                          local_prompt_tokens=local_prompt_tokens, remote_prompt_tokens=remote_prompt_tokens)
