"""The Context window page's lessons: the trained window, the overflow demo, the budget and truncation."""

from lifecycle.lessons.context_window import overflow_demo_sentence, window_sentence


def test_the_window_sentence_does_not_claim_attention_stops():
    text = window_sentence("SmolLM2-135M-Instruct", 8192)
    assert "8,192" in text and "cannot" not in text and "can reach past" in text and "worse" in text


def test_overflow_demo_sentence_names_each_way_the_demo_differs_from_the_journey():
    example = overflow_demo_sentence(256, 8_192, 8, 0)
    assert "a 256-token window where the journey has 8,192" in example
    assert "an example history of 8 messages instead of your 0" in example
    own = overflow_demo_sentence(8_192, 8_192, None, 4)
    assert "the journey's own window" in own and "your own 4 earlier messages" in own and "example" not in own
