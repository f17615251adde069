"""The Forward pass page's lesson: the residual stream's ends and its largest single addition."""

from lifecycle.lessons.forward_pass import block_lesson


def test_the_lesson_names_the_largest_addition_and_the_streams_ends():
    text = block_lesson(37, 30, "'↵'", 36, [3.0, 10.0, 802.44], [30.9, 2.0], [43.9, 1062.3])
    assert "**37 tokens**" in text and "**30 blocks**" in text and "'↵' (position 36)" in text
    assert "from 3.0 (the embedding) to 802.4 after the last block" in text
    assert "layer 1's MLP (length 1,062.3)" in text
    assert "layer 0's attention (length 50.0)" in block_lesson(3, 2, "'a'", 2, [1, 2, 3], [50.0, 1.0], [2.0, 3.0])
