"""The wording the lessons share: a share in words ("about half"), durations, byte sizes and lists."""

from __future__ import annotations

from collections.abc import Sequence

# Plain fractions a share is read as, nearest first; "about" when within this many points of one.
FRACTIONS = (
    (1 / 10, "a tenth"), (1 / 5, "a fifth"), (1 / 4, "a quarter"), (1 / 3, "a third"), (2 / 5, "two fifths"),
    (1 / 2, "half"), (3 / 5, "three fifths"), (2 / 3, "two thirds"), (3 / 4, "three quarters"),
    (4 / 5, "four fifths"), (9 / 10, "nine tenths"),
)
ABOUT = 0.025


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


def ms(seconds: float | None) -> str:
    """A duration as the pages show it: "0.42 ms", "218.4 ms", "12.3 s"; "–" when there is none."""
    if seconds is None:
        return "–"
    if seconds < 0.001:
        return f"{seconds * 1000:.2f} ms"
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def milliseconds(seconds: float) -> str:
    """A duration as the number-choosing sentences write it, always in ms: "237.3 ms"."""
    return f"{seconds * 1000:,.1f} ms"


def mib(count: int) -> str:
    """Bytes in MiB with one decimal: "45.2 MiB"."""
    return f"{count / 2**20:,.1f} MiB"


def cache_size(count: int) -> str:
    """Bytes as the KV-cache page writes them: KiB with one decimal below a MiB, else MiB with two."""
    return f"{count / 1024:,.1f} KiB" if count < 2**20 else f"{count / 2**20:,.2f} MiB"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun: "1 message", "2 messages", "1,024 entries" (``plural`` when not noun + "s")."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def and_joined(parts: Sequence[str]) -> str:
    """Parts as a list in a sentence: "a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
