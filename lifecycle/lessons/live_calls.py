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
