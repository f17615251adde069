"""The live sampling chart's data: everything the browser needs to redo temperature, top-k, top-p and
min-p itself on every slider move, without a round trip to the server.

It models one next-token decision: the model's logits for every token of the vocabulary (not a top
N: at temperature 2 the tokens beyond the top 20,000 still hold a few percent of the probability,
which top-p and the renormalization need), the logits the repetition penalty moved (that stage needs
the prompt's tokens, so it runs here, in Python, with lifecycle.stages.sampling), the tokens the chart shows
(labelled with lifecycle.stages.vocabulary.show_token, as every page shows a token) and the sliders' ranges.
The browser side is ui/live_sampling.js; its transform mirrors lifecycle.stages.sampling.apply_sampling.
Everything is plain JSON data: labels are strings the browser sets as text, never markup.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from charts.sampling import top_ids
from lifecycle.stages.sampling import STAGES, SamplingSettings, apply_sampling
from lifecycle.stages.vocabulary import show_token

LIVE_KNOBS = ("temperature", "top_p", "top_k", "min_p")
STAGE_LABELS = {"temperature": "temperature", "top_k": "top-k", "top_p": "top-p", "min_p": "min-p"}


def encoded_logits(logits: np.ndarray) -> tuple[str, str]:
    """The logits as base64 of little-endian floats and their type: float32 when that loses nothing
    (the model's own logits), float64 otherwise, so the browser computes on exactly Python's numbers."""
    raw = np.asarray(logits)
    as32 = raw.astype("<f4")
    if np.array_equal(as32.astype(np.float64), raw.astype(np.float64)):
        return base64.b64encode(as32.tobytes()).decode("ascii"), "float32"
    return base64.b64encode(raw.astype("<f8").tobytes()).decode("ascii"), "float64"


def tail_share(logits: np.ndarray, kept: int, temperature: float) -> float:
    """The probability left outside the ``kept`` most likely tokens at ``temperature`` (> 0): what a
    top-N cut of the logits would lose."""
    scores = np.sort(np.asarray(logits, dtype=np.float64))[::-1]
    weights = np.exp((scores - scores[0]) / temperature)
    return float(weights[kept:].sum() / weights.sum())


def live_sampling_data(
    logits: np.ndarray,
    previous_ids: Sequence[int],
    settings: SamplingSettings,
    token_text: Callable[[int], str],
    shown: int,
    knobs: dict[str, dict],
) -> dict:
    """The component's data for one prompt's next token, starting from ``settings``.

    ``knobs`` gives each live slider's label, range and step (top-k: its ``choices``). The
    repetition penalty of ``settings`` is applied here: ``moved`` lists the logits it changed as
    (id, new logit) pairs, and the browser starts from the logits with those replaced. ``opening`` is the
    whole transform at ``settings``, done here, for the shown tokens: the browser draws its first chart from
    it and decodes the logits after that, so the picture does not wait for the vocabulary's decode and sort.
    """
    raw = np.asarray(logits)
    penalized = apply_sampling(raw, SamplingSettings(repetition_penalty=settings.repetition_penalty), previous_ids)
    shift = penalized.shift("repetition_penalty")
    moved = [] if shift is None else [[int(i), float(v)] for i, v in zip(shift.ids, shift.after)]
    ids = top_ids(penalized.base_probs, shown)
    opening = apply_sampling(raw, settings, previous_ids)
    payload, dtype = encoded_logits(raw)
    fingerprint = hashlib.sha256(payload.encode("ascii") + repr(moved).encode("ascii")).hexdigest()[:16]
    return {
        "vocabulary": int(raw.size),
        "dtype": dtype,
        "logits": payload,
        "moved": moved,
        "fingerprint": fingerprint,
        "shown": [
            {"id": int(i), "label": show_token(token_text(int(i))), "base": float(penalized.base_probs[i])}
            for i in ids
        ],
        "settings": {knob: getattr(settings, knob) for knob in LIVE_KNOBS},
        "opening": {
            "finals": [float(opening.final_probs[i]) for i in ids],
            "removed": [int(opening.removed_by[i]) for i in ids],
            "kept": int(opening.kept),
            "entropy": float(opening.entropy_bits),
        },
        "knobs": {knob: knobs[knob] for knob in LIVE_KNOBS},
        "stages": list(STAGES),
        "stage_labels": STAGE_LABELS,
    }


def picture_only(data: dict) -> dict:
    """``data`` without the logits (``logits`` None): enough for the chart at the settings sent (its ``opening``),
    not for a slider move. A new tab's first run sends this, a fifth of a megabyte less in its way; the logits
    follow in the run after."""
    return {**data, "logits": None}


def live_settings(settings: SamplingSettings, values: dict) -> SamplingSettings:
    """``settings`` with the live sliders' ``values`` (as the browser sends them) put in."""
    return replace(
        settings,
        temperature=float(values["temperature"]), top_p=float(values["top_p"]),
        top_k=int(values["top_k"]), min_p=float(values["min_p"]),
    )
