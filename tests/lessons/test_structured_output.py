"""The Structured output page's lesson: the grammar mask, and what the tools or schema cost."""

from lifecycle.lessons.structured_output import mask_sentence, structured_lesson


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


def test_the_structured_lesson_says_what_the_tools_or_the_schema_cost():
    tools = structured_lesson(212, 0, [1, 8, 1], 1, 49_152, "tool_calls")
    assert tools.startswith("The tool definitions cost **212 prompt tokens** on every call that carries them. ")
    assert "The answer took **3 tokens**. At every step the grammar mask let through between **1** and **8**" in tools
    assert tools.endswith(" finish_reason: **tool_calls**.")
    schema = structured_lesson(0, 1_043, [5], 0, 49_152, "stop")
    assert "The schema costs no prompt tokens here" in schema and "it would cost **1,043**)" in schema
    assert "The answer took **1 token**." in schema and "tool definitions" not in schema
