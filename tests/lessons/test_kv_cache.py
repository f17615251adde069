"""The KV cache page's lessons: the prompt's cache, the cache against the weights, the prefill in the TTFT."""

from lifecycle.lessons.kv_cache import (cache_against_weights, crossover_tokens, kv_cache_sentence, latency_sentence,
                                       prefill_in_ttft)
from lifecycle.stages.kv_cache import LatencyPoint
from lifecycle.lessons.words import cache_size

# SmolLM2-135M: 30 layers x 3 KV heads x 64 x 2 x 4 bytes per position; ~111.5 MB of packed weights a step.
PER_TOKEN = 30 * 3 * 64 * 2 * 4
WEIGHTS = 111_476_736


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


def test_the_kv_cache_sentence_sizes_this_prompts_cache():
    sentence = kv_cache_sentence(37, 37 * 46_080, 46_080, 3)
    assert "**37 tokens**: **1.63 MiB**" in sentence and "**45.0 KiB** more per generated token" in sentence
    assert "among 3 query heads" in sentence and "3x smaller" in sentence
    assert cache_size(2**20 - 1) == "1,024.0 KiB" and cache_size(2**20) == "1.00 MiB"


def test_the_latency_sentence_states_the_sweeps_ends_this_prompt_and_each_lengths_fastest_decode_step():
    points = [LatencyPoint(16, 0.066, (0.013, 0.012, 0.014, 0.0125)), LatencyPoint(39, 0.082, (0.012,)),
              LatencyPoint(512, 0.771, (0.016, 0.014, 0.015, 0.0145))]
    sentence = latency_sentence(points, 39, "FIRST TOKEN.")
    assert "66 ms for 16 tokens, 771 ms for 512 (this prompt, 39 tokens: 82 ms). FIRST TOKEN. A decode" in sentence
    # 14 / 12 = 1.17 and 771 / 66 = 11.68, from each length's fastest decode step
    assert "12 ms after 16 tokens, 14 ms after 512 (1.2x, against 11.7x for prefill)" in sentence
    long = [LatencyPoint(16, 0.06, (0.012,)), LatencyPoint(1007, 1.5, (0.018,))]
    assert "1,500 ms for 1,007 (this prompt, 1,007 tokens: 1,500 ms)" in latency_sentence(long, 1007, "")
