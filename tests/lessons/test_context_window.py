"""The Context window page's lessons: the trained window, the overflow demo, the budget and truncation."""

from lifecycle.lessons.context_window import budget_lesson, overflow_demo_sentence, truncation_lesson, window_sentence
from lifecycle.stages.context_window import ContextBudget, ContextSegment, RenderedPrompt


def test_the_window_sentence_does_not_claim_attention_stops():
    text = window_sentence("SmolLM2-135M-Instruct", 8192)
    assert "8,192" in text and "cannot" not in text and "can reach past" in text and "worse" in text


def test_overflow_demo_sentence_names_each_way_the_demo_differs_from_the_journey():
    example = overflow_demo_sentence(256, 8_192, 8, 0)
    assert "a 256-token window where the journey has 8,192" in example
    assert "an example history of 8 messages instead of your 0" in example
    own = overflow_demo_sentence(8_192, 8_192, None, 4)
    assert "the journey's own window" in own and "your own 4 earlier messages" in own and "example" not in own


def _prompt(template: int, system: int, message: int) -> RenderedPrompt:
    segments = [ContextSegment("template", template, ""), ContextSegment("system prompt", system, ""),
                ContextSegment("new message", message, "")]
    return RenderedPrompt("", [], segments, [], False)


def test_the_budget_lesson_says_what_stays_free_or_how_far_it_overflows():
    prompt = _prompt(20, 1_234, 7)
    fits = budget_lesson("SmolLM2", prompt, ContextBudget(8_192, 256, prompt.segments, 1_261, 6_675, 0, True), 7)
    assert "Your message is 7 tokens, but SmolLM2 receives **1,261**" in fits
    assert "adds 20 tokens of overhead (special markers, role names, newlines), 1,234 for the system prompt." in fits
    assert "max_tokens = 256 reserved" in fits and "of the 8,192-token window **6,675 tokens stay free** (81.5% of it)" in fits
    over = budget_lesson("SmolLM2", prompt, ContextBudget(1_024, 256, prompt.segments, 1_261, 0, 493, False), 7)
    assert "of the 1,024-token window it **overflows by 493 tokens**" in over and "stay free" not in over


def test_the_truncation_lesson_counts_what_was_dropped():
    text = truncation_lesson(256, 1_075, "drop_oldest_turns", 6, 8, 212, 12)
    assert "overflows the 256-token window by **1,075 tokens**" in text
    assert "(`drop_oldest_turns`) removes **6 of 8 history messages**" in text
    assert "the prompt shrinks to 212 tokens and 12 stay free" in text
