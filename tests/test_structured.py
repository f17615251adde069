"""The stream table of the Structured output page: each chunk delta with what a client has glued together after it,
on deltas made by the app's own stream reader (lifecycle.features.tools.ToolCallStream)."""

from __future__ import annotations

from lifecycle.features.structured import StructuredStep, stream_rows
from lifecycle.features.tools import CALL_OPEN, ToolCallStream


def _steps(pieces: list[str], reader: ToolCallStream | None) -> list[StructuredStep]:
    return [StructuredStep(i, piece, 1, 1.0, piece, True,
                           reader.feed(piece) if reader else ([{"content": piece}] if piece else []))
            for i, piece in enumerate(pieces)]


def test_a_call_s_arguments_grow_fragment_by_fragment_from_nothing_after_its_first_delta():
    # The third piece ends the call's name and starts its arguments: one step, two deltas (as a token like ' {"' does).
    pieces = [CALL_OPEN, '{"name": "get_weather", ', '"arguments": {"', 'city', '": "', 'Paris', '"}', "}"]
    rows = stream_rows(_steps(pieces, ToolCallStream("call_1")))
    first = rows[0].delta["tool_calls"][0]
    assert (first["id"], first["function"]["name"], rows[0].so_far) == ("call_1", "get_weather", "")
    assert rows[0].step == rows[1].step == 3
    assert [row.so_far for row in rows] == ["", '{"', '{"city', '{"city": "', '{"city": "Paris', '{"city": "Paris"}']


def test_plain_content_is_glued_as_it_comes():
    rows = stream_rows(_steps(['{"', "answer", '": ', "42", "", "}"], None))
    assert [row.so_far for row in rows] == ['{"', '{"answer', '{"answer": ', '{"answer": 42', '{"answer": 42}']
    assert [row.step for row in rows] == [1, 2, 3, 4, 6]  # the fifth step released no text, so it sent no delta
