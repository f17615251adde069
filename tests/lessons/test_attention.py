"""The Attention page's lesson: the share on the first token and where the last token looks hardest, with
the focus found in the maps themselves."""

import numpy as np

from charts.live_attention import attention_focus
from lifecycle.lessons.attention import AttentionFocus, attention_lesson


def test_the_lesson_states_the_maps_own_focus():
    maps = np.zeros((2, 2, 4, 4))
    maps[..., 0] = 1.0  # everything on the first token ...
    maps[1, 0, 3] = [0.5, 0.1, 0.3, 0.1]  # ... but in layer 1, head 0 the last token also looks at token 2
    text = attention_lesson(attention_focus(maps), 4, "'a'", "'d'", "'c'")
    assert "**4 tokens**" in text and "97% of all attention" in text
    assert "'c' (**30%**, layer 1, head 0" in text


def test_the_lesson_rounds_the_shares_and_names_the_quoted_tokens():
    focus = AttentionFocus(layer=29, head=8, key=5, weight=0.4449, sink_share=0.6251)
    text = attention_lesson(focus, 37, "'<|im_start|>'", "'↵'", "'sky'")
    assert "Here 63% of all attention lands on the first token '<|im_start|>'" in text
    assert "the last token '↵' attends most to 'sky' (**44%**, layer 29, head 8, shown first)" in text
