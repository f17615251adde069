"""The Guess page's lesson: the rounds, the vocabulary and the points by rank."""

from lifecycle.features.guess import POINTS_BY_RANK
from lifecycle.lessons.guess import guess_lesson, points_rule


def test_the_points_rule_names_single_ranks_and_ranges():
    assert points_rule(((1, 10), (5, 5), (20, 3), (100, 1))) == (
        "rank 1: 10; ranks 2–5: 5; ranks 6–20: 3; ranks 21–100: 1; lower: 0")
    assert points_rule(((2, 4), (3, 1))) == "ranks 1–2: 4; rank 3: 1; lower: 0"


def test_the_lesson_states_the_rounds_and_the_vocabulary():
    text = guess_lesson(4, 49_152, POINTS_BY_RANK)
    assert text.startswith("A game for a class, 4 rounds.")
    assert "ranked among all 49,152 tokens. Points by rank: rank 1: 10;" in text
