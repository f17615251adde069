"""The engine-state section of Live calls: the batch as it runs, this session's own request marked."""

import time

from lifecycle.journey import JourneyInput
from lifecycle.results import shared_results
from lifecycle.stages.sampling import SamplingSettings
from tests.pages.harness import markdowns, plotly_figure

PROMPT = "Count slowly from one to forty, one number per line."


def _metrics(app) -> dict[str, str]:
    return {metric.label: metric.value for metric in app.metric}


def test_live_calls_shows_the_running_batch_with_the_sessions_own_generation(run_page, loaded):
    settings = dict(prompt=PROMPT, temperature=0.7, max_tokens=200, seed=42)
    inp = JourneyInput(PROMPT, sampling=SamplingSettings(temperature=0.7, seed=42), max_tokens=200)
    pending = shared_results(loaded).answer(inp)  # as if this session had opened the Generation page
    deadline = time.monotonic() + 60
    while not pending.progress and time.monotonic() < deadline:
        time.sleep(0.05)
    app = run_page("live-calls", **settings)
    assert not app.exception
    assert "The engine: every model call, batched" in [s.value for s in app.subheader]
    metrics = _metrics(app)
    assert int(metrics["In the batch now"]) >= 1
    running = next(df.value for df in app.dataframe if "phase" in df.value.columns)
    assert "page (yours)" in list(running["from"])
    assert max(plotly_figure(app, "engine_timeline").data[0].y) >= 1
    assert any("steps** carrying" in m for m in markdowns(app))
    pending.result(300)


def test_live_calls_says_which_kernels_this_machine_runs(run_page, loaded):
    from lifecycle.engine import shared_engine

    stack = shared_engine(loaded).stack
    stack.few_rows()  # timed by the engine after its first work, or when asked, as here
    app = run_page("live-calls", prompt=PROMPT)
    assert not app.exception
    caption = next(c.value for c in app.caption if c.value.startswith("Kernels on this machine"))
    assert stack.kernels in caption
    limits = sorted({s.packed_up_to for s in stack.choice.shapes if s.packed_up_to > 1}, reverse=True)
    assert ("steps of a few rows: packed codes for" in caption) == bool(limits)
    for rows in limits:
        assert f"up to {rows} rows" in caption
    for kernel, count in stack.choice.counts().items():  # the kernels measured fastest at start
        assert f"{kernel} for {count} of {len(stack.matrices())} matrices" in caption


def test_a_room_watching_the_engine_panel_slows_its_refresh_and_says_why(run_page, loaded, monkeypatch):
    import ui.engine_state
    from ui.audience import Audience

    room = Audience(runs_per_second=ui.engine_state.ENGINE_PANELS.runs_per_second)
    for n in range(59):
        room.watch(f"someone-{n}", 1.0, now=time.time())
    monkeypatch.setattr(ui.engine_state, "ENGINE_PANELS", room)
    app = run_page("live-calls", prompt=PROMPT)
    assert not app.exception
    interval = 60 / room.runs_per_second
    note = next(c.value for c in app.caption if c.value.startswith("This panel refreshes"))
    assert note.startswith(f"This panel refreshes every {interval:g} s, not every 1 s: 60 sessions watch it"), note


def test_the_engine_panel_watched_alone_refreshes_every_second(run_page, loaded, monkeypatch):
    import ui.engine_state
    from ui.audience import Audience

    monkeypatch.setattr(ui.engine_state, "ENGINE_PANELS", Audience(runs_per_second=5.0))
    app = run_page("live-calls", prompt=PROMPT)
    assert "This panel refreshes every 1 s." in [c.value for c in app.caption]


def test_the_engine_panel_counts_the_page_jobs_in_hand(run_page, loaded):
    """A page job holding the engine while Live calls draws its panel: the sentence counts it, as the engine does."""
    from lifecycle.engine import shared_engine
    from tests.held_engine import engine_held

    with engine_held(shared_engine(loaded)):
        app = run_page("live-calls", prompt=PROMPT)
    assert not app.exception
    assert any("**1 page job** in hand" in m for m in markdowns(app))
    assert not any("page job" in m for m in markdowns(run_page("live-calls", prompt=PROMPT)))
