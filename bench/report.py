"""How benchmark rows are printed: name, measured value, target, and whether it was met."""

from __future__ import annotations

import time


def row(name: str, value: str, target: str = "", verdict: str = "") -> None:
    print(f"{name:<50} {value:>10}  {target:<18} {verdict}", flush=True)


def heading(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def check(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def median_seconds(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
