"""The Generation page's lesson: the steps, the prefill and the mean step, and why it stopped."""

from lifecycle.lessons.generation import generation_sentence


def test_the_generation_sentence_states_this_runs_steps_and_why_it_stopped():
    stopped = generation_sentence(21, 37, 0.2346, 0.4410, "stop", 48)
    assert "one token per step: 21 tokens**" in stopped and "**37 prompt tokens** (the prefill, 234.6 ms)" in stopped
    assert "each step took **21.0 ms** on average" in stopped  # 441.0 ms / 21
    assert "end-of-turn token (finish_reason **stop**)" in stopped
    cut = generation_sentence(1, 5, 0.1, 0.02, "length", 1)
    assert "one token per step: 1 token**" in cut and "max_tokens = 1 (finish_reason **length**)" in cut
    assert "finish_reason **content_filter**" in generation_sentence(3, 5, 0.1, 0.02, "content_filter", 9)
