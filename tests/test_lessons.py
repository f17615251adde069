"""The pages' run-dependent sentences: each one checked with numbers on both sides of its threshold."""

from types import SimpleNamespace

import pytest

from lifecycle.features.lessons import (
    Gap,
    cache_against_weights,
    crossover_tokens,
    embedding_sentence,
    engine_wait_sentence,
    gaps_sentence,
    ninety_percent_sentence,
    overflow_demo_sentence,
    pca_sentence,
    prefill_in_ttft,
    probability_mass_sentence,
    share_in_words,
    stream_gaps,
    tokens_to_reach,
    ttft_sentence,
    window_sentence,
)


def test_a_share_is_half_only_near_half():
    assert share_in_words(0.5) == "about half"
    assert share_in_words(0.51) == "about half"
    assert "half" not in share_in_words(0.609)
    assert share_in_words(0.609) == "about three fifths"
    assert share_in_words(0.886) == "about nine tenths"
    assert share_in_words(0.34) == "about a third"
    assert share_in_words(0.56) == "less than three fifths"
    assert share_in_words(0.99) == "nearly all"
    assert share_in_words(0.01) == "almost none"


def test_ttft_is_mostly_the_prefill_only_above_half():
    above = ttft_sentence(0.200, 37, setup=0.002, waited=0.010, prefill=0.150)
    assert "mostly the prefill of 37 prompt tokens" in above and "150.0 ms" in above and "75%" in above
    # The run: 698.3 ms to the first token, 237.3 ms of prefill, 450 ms in the engine's queue.
    below = ttft_sentence(0.6983, 37, setup=0.0, waited=0.450, prefill=0.2373)
    assert "mostly" not in below
    assert "only 237.3 ms" in below and "(34%)" in below
    assert "450.0 ms waiting in the engine's queue and 11.0 ms choosing the first token" in below  # 698.3-237.3-450
    assert "before the engine" not in below
    exactly_half = ttft_sentence(0.2, 5, setup=0.090, waited=0.0, prefill=0.1)
    assert "mostly" not in exactly_half and "waiting" not in exactly_half
    assert "90.0 ms before the engine had the request and 10.0 ms choosing" in exactly_half


def test_prefill_in_ttft_states_this_runs_share():
    low = prefill_in_ttft(0.6983, 0.2373)
    assert "698.3 ms" in low and "237.3 ms" in low and "about a third" in low and "where the rest went" in low
    high = prefill_in_ttft(0.150, 0.120)
    assert "about four fifths" in high and "the rest" not in high


def test_prefill_in_ttft_says_when_the_journeys_prefill_was_held_up():
    held_up = prefill_in_ttft(0.9868, 0.8660, measured_alone=0.133)
    assert "That is 6.5x the 133.0 ms this prompt's prefill took measured alone just now" in held_up
    assert "held it up" not in prefill_in_ttft(0.9868, 0.2600, measured_alone=0.133)  # 1.95x: within the noise
    assert "held it up" not in prefill_in_ttft(0.9868, 0.8660)


def test_probability_mass_names_the_top_tokens_real_share():
    assert probability_mass_sentence(0.609, 1) == "About three fifths of the probability (60.9%) sits in that one token"
    assert probability_mass_sentence(0.886, 1).startswith("About nine tenths of the probability (88.6%)")
    assert probability_mass_sentence(0.50, 1).startswith("About half of the probability (50.0%)")
    assert probability_mass_sentence(0.31, 4) == "Half of the probability sits in the top 4 tokens"



def test_tokens_to_reach_counts_the_fewest_most_likely_tokens():
    probabilities = [0.012, 0.886, 0.014, 0.05, 0.038]
    assert tokens_to_reach(probabilities, 0.5) == (1, pytest.approx(0.886))
    assert tokens_to_reach(probabilities, 0.9) == (2, pytest.approx(0.936))
    assert tokens_to_reach(probabilities, 0.95) == (3, pytest.approx(0.974))


def test_the_ninety_percent_sentence_states_what_the_tokens_really_hold():
    assert ninety_percent_sentence(3, 0.912, 49_152) == (
        "the top 3 together hold 91.2% (the fewest that reach 90%), and the other 49,149 share the remaining 8.8%")
    assert ninety_percent_sentence(1, 0.97, 49_152) == (
        "that token alone holds over 90%, and the other 49,151 share the remaining 3.0%")


# SmolLM2-135M: 30 layers x 3 KV heads x 64 x 2 x 4 bytes per position; ~111.5 MB of packed weights a step.
PER_TOKEN = 30 * 3 * 64 * 2 * 4
WEIGHTS = 111_476_736


def test_crossover_is_weights_over_cache_per_token():
    assert crossover_tokens(WEIGHTS, PER_TOKEN) == 2420
    assert crossover_tokens(PER_TOKEN * 10, PER_TOKEN) == 10
    assert crossover_tokens(PER_TOKEN * 10 + 1, PER_TOKEN) == 11


def test_cache_against_weights_flips_at_the_crossover():
    short = cache_against_weights(37, PER_TOKEN, WEIGHTS, 8192)
    assert "a small part of its work" in short and "(2%)" in short and "about **2,420 tokens**" in short
    middle = cache_against_weights(1000, PER_TOKEN, WEIGHTS, 8192)
    assert "sizeable part" in middle and "(41%)" in middle
    long = cache_against_weights(2500, PER_TOKEN, WEIGHTS, 8192)
    assert "small" not in long and "bigger part of every decode step" in long and "(103%)" in long
    never = cache_against_weights(37, PER_TOKEN, WEIGHTS, 1024)
    assert "stays below them even for the full 1,024-token window" in never


def _step(seconds, delta, held=b""):
    return SimpleNamespace(seconds=seconds, delta=delta, held=held)


def test_stream_gaps_pair_each_frame_with_the_steps_behind_it():
    steps = [_step(0.002, "The"), _step(0.050, ""), _step(0.045, " é", b""), _step(0.040, "")]
    steps[1].held = b"\xc3"
    (gap,) = stream_gaps([0.300, 0.396], steps)
    assert gap.seconds == pytest.approx(0.096) and gap.step_seconds == pytest.approx(0.095)
    assert gap.tokens == 2 and gap.held_character
    assert stream_gaps([0.3], steps) is None  # two frames released text, only one time given


def test_gaps_sentence_says_one_step_only_when_it_was():
    even = [Gap(0.045, 0.044, 1, False), Gap(0.050, 0.051, 1, False)]
    assert gaps_sentence(even).endswith("here all 2 gaps were one step each.")
    # The sky prompt: " answer" and " to" 0 ms apart after 118.8 ms; their steps 52.9, 42.3 and 46.9 ms.
    batched = [Gap(0.1188, 0.0529 + 0.0423, 1, False), Gap(0.0, 0.0469, 1, False)]
    text = gaps_sentence(batched)
    assert "delivery batching" in text and "46.9 ms apart" in text and "one step each" not in text
    assert "character" not in text
    character = [Gap(0.095, 0.095, 2, True)]
    text = gaps_sentence(character)
    assert "1 frame carried more than one token" in text and "a character spans them" in text
    assert "batching" not in text
    held_for_stop = [Gap(0.095, 0.095, 2, False)]
    assert "stop sequence" in gaps_sentence(held_for_stop)


def test_a_frame_is_delivered_together_only_when_its_step_ended_later():
    assert Gap(0.0005, 0.040, 1, False).delivered_together
    assert not Gap(0.0005, 0.001, 1, False).delivered_together  # the steps themselves were that close
    assert not Gap(0.030, 0.040, 1, False).delivered_together


def test_pca_directions_are_bounded_by_the_number_of_vectors():
    few = pca_sentence(13, 576, 0.447)
    assert "other 10 directions" in few and "44.7%" in few and "most of the spread" in few
    assert "574" not in few
    many = pca_sentence(600, 576, 0.62)
    assert "other 574 directions" in many and "the rest of the spread" in many and "most of" not in many
    three = pca_sentence(3, 576, 1.0)
    assert "exact" in three and "other" not in three


def test_the_window_sentence_does_not_claim_attention_stops():
    text = window_sentence("SmolLM2-135M-Instruct", 8192)
    assert "8,192" in text and "cannot" not in text and "can reach past" in text and "worse" in text


def test_the_engine_wait_says_what_was_there():
    assert "at once" in engine_wait_sentence(0.0004, (), 0)
    alone = engine_wait_sentence(0.004, (), 0)
    assert "4.0 ms" in alone and "nothing else was in the engine" in alone and "other requests" not in alone
    busy = engine_wait_sentence(0.5963, ("page", "api", "page"), 1)
    assert "596.3 ms" in busy and "2 page requests, 1 api request and 1 exclusive job" in busy
    job = engine_wait_sentence(0.45, (), 1)
    assert "1 exclusive job (an inspection pass" in job and "request" not in job.split("held")[1]


def test_embedding_sentence_counts_the_templates_tokens_only_when_there_are_some():
    templated = embedding_sentence(7, 37, 49_152, 576)
    assert "**7 tokens**" in templated and "chat template's 30 more" in templated and "**37 tokens**" in templated
    assert "49,152 x 576" in templated and "37 vectors of **576 numbers**" in templated
    bare = embedding_sentence(5, 5, 100, 8)
    assert "chat template" not in bare and "reads exactly those" in bare and "5 vectors of **8 numbers**" in bare


def test_overflow_demo_sentence_names_each_way_the_demo_differs_from_the_journey():
    example = overflow_demo_sentence(256, 8_192, 8, 0)
    assert "a 256-token window where the journey has 8,192" in example
    assert "an example history of 8 messages instead of your 0" in example
    own = overflow_demo_sentence(8_192, 8_192, None, 4)
    assert "the journey's own window" in own and "your own 4 earlier messages" in own and "example" not in own


def test_the_generation_sentence_states_this_runs_steps_and_why_it_stopped():
    from lifecycle.features.lessons import generation_sentence

    stopped = generation_sentence(21, 37, 0.2346, 0.4410, "stop", 48)
    assert "one token per step: 21 tokens**" in stopped and "**37 prompt tokens** (the prefill, 234.6 ms)" in stopped
    assert "each step took **21.0 ms** on average" in stopped  # 441.0 ms / 21
    assert "end-of-turn token (finish_reason **stop**)" in stopped
    cut = generation_sentence(1, 5, 0.1, 0.02, "length", 1)
    assert "one token per step: 1 token**" in cut and "max_tokens = 1 (finish_reason **length**)" in cut
    assert "finish_reason **content_filter**" in generation_sentence(3, 5, 0.1, 0.02, "content_filter", 9)


def test_the_kv_cache_sentence_sizes_this_prompts_cache():
    from lifecycle.features.lessons import cache_size, kv_cache_sentence

    sentence = kv_cache_sentence(37, 37 * 46_080, 46_080, 3)
    assert "**37 tokens**: **1.63 MiB**" in sentence and "**45.0 KiB** more per generated token" in sentence
    assert "among 3 query heads" in sentence and "3x smaller" in sentence
    assert cache_size(2**20 - 1) == "1,024.0 KiB" and cache_size(2**20) == "1.00 MiB"


def test_the_mask_sentence_invents_no_mask_where_no_step_was_narrowed():
    from lifecycle.features.lessons import mask_sentence

    free = mask_sentence([49_152] * 9, 0, 49_152)  # tool_choice "none": no grammar ran
    assert "grammar mask let through" not in free
    assert free == "No step was narrowed: the model could take any of the 49,152 tokens at every step."
    call = mask_sentence([1, 1, 8, 48_765, 1], 2, 49_152)
    assert "between **1** and **48,765** of the 49,152 tokens; **3** steps had exactly one allowed token" in call
    assert call.endswith("at **2** steps the model's own favourite was masked out.")
    one = mask_sentence([3, 3], 1, 49_152)
    assert "let through exactly **3** of the 49,152 tokens; **0** steps" in one and "at **1** step the" in one
    assert "**1** step had exactly one" in mask_sentence([1, 5], 0, 49_152)


def test_the_detokenized_sentence_counts_only_the_bytes_that_became_content():
    from lifecycle.features.lessons import detokenized_sentence

    usage = {"prompt_tokens": 41, "completion_tokens": 30, "total_tokens": 71}
    cut = detokenized_sentence(30, 47, 15, 2, 0, 15, "length", usage)  # stopped two bytes into a character
    assert "(**45 bytes** of content in all)" in cut and "until the next token completed it" not in cut
    assert "those **2 bytes** never became text and were dropped" in cut
    assert "special token" not in cut and "usage of **71 tokens** (41 prompt + 30 completion)" in cut
    whole = detokenized_sentence(24, 108, 3, 0, 1, 100, "stop", usage)
    assert "(**108 bytes** of content" in whole and "**3** of them ended inside a character" in whole
    assert "until the next token completed it" in whole and "dropped" not in whole
    assert "1 special token (end of turn) was left out of the content." in whole
    assert "2 special tokens (end of turn) were left out" in detokenized_sentence(3, 5, 0, 0, 2, 5, "stop", usage)
    plain = detokenized_sentence(1, 5, 0, 0, 0, 5, "length", usage)
    assert "**1 token id**" in plain and "none of them split a character" in plain
