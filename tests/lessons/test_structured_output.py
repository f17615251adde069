"""The Structured output page's lesson: the grammar mask, and what the tools or schema cost."""

from lifecycle.lessons.structured_output import mask_sentence


def test_the_mask_sentence_invents_no_mask_where_no_step_was_narrowed():
    free = mask_sentence([49_152] * 9, 0, 49_152)  # tool_choice "none": no grammar ran
    assert "grammar mask let through" not in free
    assert free == "No step was narrowed: the model could take any of the 49,152 tokens at every step."
    call = mask_sentence([1, 1, 8, 48_765, 1], 2, 49_152)
    assert "between **1** and **48,765** of the 49,152 tokens; **3** steps had exactly one allowed token" in call
    assert call.endswith("at **2** steps the model's own favourite was masked out.")
    one = mask_sentence([3, 3], 1, 49_152)
    assert "let through exactly **3** of the 49,152 tokens; **0** steps" in one and "at **1** step the" in one
    assert "**1** step had exactly one" in mask_sentence([1, 5], 0, 49_152)
