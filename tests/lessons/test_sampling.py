"""The Sampling page's lessons: what the sliders' sampling and the API's stages did to the distribution."""

from lifecycle.lessons.sampling import api_stages_lesson, what_if_lesson
from lifecycle.stages.sampling import SamplingSettings


def test_the_what_if_lesson_names_the_settings_or_greedy_decoding():
    settings = SamplingSettings(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1)
    text = what_if_lesson(0.6093, 2.3456, False, settings, 12, 49_152, 0.8321, 1.04)
    assert "has a **60.9%** chance, and the distribution's entropy is **2.35 bits**" in text
    assert "with temperature 0.7, top-p 0.9, top-k 40 and min-p 0.05 and a repetition penalty of 1.1" in text
    assert "**12 of 49,152** tokens stay in play, the top token's chance becomes **83.2%**" in text
    assert "the entropy **1.04 bits**." in text
    greedy = what_if_lesson(0.6093, 2.3456, True, SamplingSettings(temperature=0.0), 1, 49_152, 1.0, 0.0)
    assert "with greedy decoding (temperature 0) and a repetition penalty of 1," in greedy
    assert "top-k" not in greedy and "**1 of 49,152**" in greedy and "**100.0%**" in greedy


def test_the_api_stages_lesson_says_what_the_mask_removed_and_what_stays():
    masked = api_stages_lesson(True, 49_140, 12, 49_152, 7)
    assert masked.startswith("The grammar mask removed **49,140 of 49,152** tokens: only **12** can start")
    assert masked.endswith("**7** tokens stay in play.")
    off = api_stages_lesson(False, 0, 49_152, 49_152, 1)
    assert off.startswith("No response_format is set, so the grammar mask removes nothing.")
    assert off.endswith("**1** token stays in play.")
