"""The engine charts: batch size per step on a time axis, and rows that never name someone else's request."""

from lifecycle.engine import RunningRequest, StepRecord, WaitingRequest
from charts.engine import batch_timeline, running_rows, waiting_rows

NOW = 1_000.0


def _step(ago: float, batch: int, prefill: int = 0) -> StepRecord:
    return StepRecord(time=NOW - ago, batch_size=batch, request_ids=tuple(range(batch)), prefill_tokens=prefill,
                      decode_tokens=batch, generated_tokens=batch, seconds=0.05)


def test_the_timeline_draws_each_recent_step_at_its_time_with_its_batch_size():
    figure = batch_timeline([_step(90, 1), _step(5, 3, prefill=40), _step(1, 4)], NOW, seconds=60)
    bars = figure.data[0]
    assert list(bars.x) == [-5.0, -1.0]  # the step 90 s ago is outside the window
    assert list(bars.y) == [3, 4]
    assert bars.marker.color[0] != bars.marker.color[1]  # a step that read a prompt is coloured apart
    assert figure.layout.xaxis.range == (-60, 0)


def test_rows_mark_the_viewers_own_request_and_show_no_one_elses_tag():
    running = [RunningRequest(7, "page", "prompt-abc123", 40, 3, "decode", 0, 0.5),
               RunningRequest(8, "api", "call-secret", 12, 0, "prefill", 0, None)]
    rows = running_rows(running, mine="prompt-abc123")
    assert [r["from"] for r in rows] == ["page (yours)", "api"]
    assert rows[1]["phase"].startswith("reading the prompt") and rows[1]["waited (s)"] is None
    assert "call-secret" not in repr(rows)
    waiting = waiting_rows([WaitingRequest(9, "warm", "prompt-x", 1), WaitingRequest(10, "page", "prompt-abc123", 2)],
                           mine="prompt-abc123")
    assert waiting == [{"place in line": 1, "request": 9, "from": "warm"},
                       {"place in line": 2, "request": 10, "from": "page (yours)"}]
