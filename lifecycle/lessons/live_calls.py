"""The Live calls page's lesson: the app's own API, and what its call log shows the reader."""

from __future__ import annotations


def live_calls_lesson(shown: int, answered: int, sees_all: bool) -> str:
    """The page's lesson: ``shown`` recent calls the reader may see (every key's when ``sees_all``, else their
    own key's), ``answered`` of them answered; with none, that the log holds none of them yet."""
    whose = "every key's" if sees_all else "your key's"
    logged = (
        f"The call log shows **{shown}** of {whose} recent calls: **{answered}** answered, "
        f"**{shown - answered}** refused, cancelled or failed."
        if shown else f"It holds none of {whose} calls yet."
    )
    return (
        "This app also serves an OpenAI-compatible API at `/v1`, from the same process and the same model. "
        f"{logged} Every call is kept with its whole journey, so the stages the other pages simulate can be "
        "seen here on a real request from a real client."
    )


def refresh_note(interval: float, watchers: int, fastest: float) -> str:
    """How often a live panel refreshes, and why slower than ``fastest`` when ``watchers`` sessions watch it."""
    if interval <= fastest:
        return f"This panel refreshes every {interval:g} s."
    return (f"This panel refreshes every {round(interval, 1):g} s, not every {fastest:g} s: {watchers} sessions watch "
            "it, and each refresh costs the server some Python, so the room's panels together refresh a few times a "
            "second and leave the cores to the model.")


def engine_lesson(window: float, steps: int, mean_batch: float, generated: int, span: float, rate: float,
                  jobs: int = 0) -> str:
    """The engine panel's sentence: ``steps`` model steps in the last ``window`` seconds, ``mean_batch`` requests
    each on average, ``generated`` tokens over the ``span`` seconds since the first of them began (``rate`` a
    second); ``jobs`` page jobs in hand, which wait for one another, not for the batch."""
    if not steps and not jobs:
        return (f"The engine is idle: no model step in the last {window:.0f} s. Open a page with a new prompt, or "
                "call the API, and watch the batch.")
    if not steps:
        return f"No generation step in the last {window:.0f} s. {_jobs_sentence(jobs)}"
    sentence = (
        f"In the last {window:.0f} s the engine ran **{steps} steps** carrying **{mean_batch:.1f} requests** on "
        f"average and generated **{generated} tokens** in the {span:.2f} s since the first of those steps began: "
        f"**{rate:,.1f} per second** for the whole server. Each step reads the model's weights once for every "
        "request in the batch, so many people are served for little more than the price of one; requests join and "
        "leave between steps."
    )
    return f"{sentence} {_jobs_sentence(jobs)}" if jobs else sentence


def _jobs_sentence(jobs: int) -> str:
    return (f"**{jobs} page {'job' if jobs == 1 else 'jobs'}** in hand: the inspection passes and timings pages ask "
            "for (attention maps, the logit lens, the KV cache's growth) run one at a time, first come first served, "
            "each between two steps: a page waits for the jobs ahead of it, not for the batch's answers.")
