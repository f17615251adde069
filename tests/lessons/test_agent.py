"""The Agents page's sentences: each turn of phrase on both sides of its threshold."""

from lifecycle.lessons.agent import (agent_loop_lesson, injection_sentence, roads_sentence, summation_sentence,
                                     tendency_sentence)


def test_the_tendency_sentence_follows_the_counts():
    lowered = tendency_sentence(12, 9, 3, 0.6, 0.2)
    assert "lowered" in lowered and "**9 of 12** to **3 of 12**, not to 0." in lowered
    assert "fell from **60%** to **20%**" in lowered
    assert "none in these 12 draws" in tendency_sentence(12, 9, 0, 0.6, 0.2)
    same = tendency_sentence(12, 4, 4, 0.3, 0.3)
    assert "did not change" in same and "stayed at **30%**" in same
    raised = tendency_sentence(12, 1, 5, 0.08, 0.15)
    assert "*raised*" in raised and "**1 of 12** to **5 of 12**" in raised and "rose from **8%** to **15%**" in raised


def test_the_injection_sentence_states_both_moves():
    text = injection_sentence(12, 1, 0, 0.12, 0.09)
    assert "from **1** to **0 of 12**" in text and "fell from **12%** to **9%**" in text
    counts_only = injection_sentence(12, 2, 2, 0.30, 0.12)
    assert "did not change how many answers say the phrase (**2 of 12**)" in counts_only
    assert "fell from **30%** to **12%**" in counts_only and "moved the answers" not in counts_only


def test_the_injection_sentence_draws_no_lesson_from_no_effect():
    nothing = injection_sentence(12, 3, 3, 0.301, 0.298)
    assert "changed nothing measurable here" in nothing and "stayed at **30%**" in nothing
    assert "is read like any other instruction" not in nothing and "moved" not in nothing


def test_the_roads_sentence_exact_unchanged_and_flipped():
    exact = roads_sentence(12, [("batch", 0.0), ("one pass", 0.0)], [("batch", []), ("one pass", [])], 3, 0.5)
    assert "bit for bit" in exact
    kept = roads_sentence(12, [("batch", 6e-5), ("one pass", 3e-5)], [("batch", []), ("one pass", [])], 9, 0.0168)
    assert "batch **6.0e-05**" in kept and "no greedy pick changed over the 12 tokens" in kept
    assert "different logits on different roads" in kept
    some = roads_sentence(12, [("batch", 6e-5), ("other threads", 0.0)], [("batch", []), ("other threads", [])], 9,
                          0.0168)
    assert "different logits on some roads" in some and "other threads **0** (bit for bit)" in some
    assert "**0.0168** (step 9), **280×**" in kept
    flipped = roads_sentence(12, [("batch", 0.02)], [("batch", [4, 7])], 4, 0.01)
    assert "change the greedy pick (batch at steps 4, 7)" in flipped and "no greedy pick" not in flipped


def test_the_summation_sentence():
    assert "the same here" in summation_sentence(1.5, 1.5, 1.5, 576)
    differs = summation_sentence(29.5917873, 29.5917683, 29.5917673, 576)
    assert "sum of 576 products" in differs and "**29.5917873**" in differs and "**29.5917683**" in differs


def test_the_loop_lesson_counts_the_calls_and_the_growth_only_over_several_rounds():
    one = agent_loop_lesson(1, "answered", 0, 0, ["get_time"], 310, 310, 0)
    assert "**1 call** of the model and ended with a text answer" in one
    assert "**0 tool calls** here (0 answered with an error)" in one
    assert "re-sent" not in one and "Tools: `get_time`;" in one
    three = agent_loop_lesson(3, "round_limit", 1, 1, ["get_time", "calculator"], 310, 1_412, 1_204)
    assert "**3 calls** of the model and reached its round limit" in three
    assert "**1 tool call** here (1 answered with an error)" in three
    assert "Round 3 re-sent **1,412 prompt tokens** for round 1's **310**, **1,204** of them served" in three
    assert "Tools: `get_time`, `calculator`;" in three
    assert "max_tokens cut the answer off" in agent_loop_lesson(2, "cut_off", 2, 0, ["t"], 10, 20, 10)
