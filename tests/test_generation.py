"""The step loop on the real model: greedy equals model.generate, every way of finishing, branching, seeding, cancelling."""

import threading

import numpy as np
import pytest
import torch

from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import alternatives, generate, generate_steps
from lifecycle.stages.sampling import SamplingSettings, apply_sampling
from tests.reference import reference_tokenizer

GREEDY = SamplingSettings(temperature=0)
PARIS = "What is the capital of France? Answer with one word."  # greedy: a short sentence, then <|im_end|>


def chat_ids(loaded, question):
    with loaded.tokenizer_lock:
        return reference_tokenizer(loaded).apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True
        )["input_ids"]


def hf_greedy(loaded, ids, max_new_tokens):
    with loaded.lock, torch.inference_mode():
        out = loaded.model.generate(
            torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens, do_sample=False,
        )
    return out[0, len(ids):].tolist()


@pytest.fixture(scope="module")
def paris(loaded):
    ids = chat_ids(loaded, PARIS)
    return ids, generate(loaded, ids, GREEDY, 16)


def test_greedy_step_loop_equals_model_generate(loaded, paris):
    ids, run = paris
    assert run.token_ids == hf_greedy(loaded, ids, 16)
    hi = chat_ids(loaded, "Say hi")
    assert generate(loaded, hi, GREEDY, 10).token_ids == hf_greedy(loaded, hi, 10)


def test_stops_at_eos_and_keeps_it_out_of_the_text(loaded, paris):
    _, run = paris
    assert run.finish_reason == "stop"
    assert run.steps[-1].token_id == loaded.eos_token_id and run.steps[-1].finished == "stop"
    assert all(step.finished is None for step in run.steps[:-1])
    assert run.completion_tokens < 16
    assert "<|im_end|>" not in run.text and "Paris" in run.text
    assert run.text == reference_tokenizer(loaded).decode(run.token_ids, skip_special_tokens=True)
    assert run.prefill_seconds > 0 and run.decode_seconds == pytest.approx(sum(s.seconds for s in run.steps))


def test_length_at_max_tokens(loaded):
    run = generate(loaded, chat_ids(loaded, "Say hi"), GREEDY, 5)
    assert run.finish_reason == "length" and run.completion_tokens == 5
    assert [step.finished for step in run.steps] == [None] * 4 + ["length"]
    assert run.text == reference_tokenizer(loaded).decode(run.token_ids)


def test_stop_sequence_trims_the_text(loaded, paris):
    ids, full = paris
    run = generate(loaded, ids, GREEDY, 16, stop=[" Paris", "zzz"])
    assert run.finish_reason == "stop"
    assert run.text == full.text[: full.text.index(" Paris")]
    assert run.token_ids == full.token_ids[: len(run.token_ids)] and run.token_ids[-1] != loaded.eos_token_id
    spanning = generate(loaded, ids, GREEDY, 16, stop="of Fr")  # the stop text spans two tokens
    assert spanning.text == full.text[: full.text.index("of Fr")]


def test_possible_stop_prefix_is_held_then_released(loaded, paris):
    ids, full = paris
    run = generate(loaded, ids, GREEDY, 16, stop=["France is Lyon"])  # starts matching, never completes
    assert run.finish_reason == "stop" and run.text == full.text
    france = next(s for s in run.steps if s.text == " France")
    assert france.delta == " "  # "France" could begin the stop sequence, so it waits
    assert "".join(s.delta for s in run.steps) == full.text


def test_forced_token_branches_and_continues_consistently(loaded, paris):
    ids, full = paris
    alternative = next(c for c in full.steps[1].alternatives if c.id != full.steps[1].token_id)
    run = generate(loaded, ids, GREEDY, 6, forced={1: alternative.id})
    assert run.steps[0].token_id == full.steps[0].token_id and not run.steps[0].forced
    assert run.steps[1].token_id == alternative.id and run.steps[1].forced
    assert run.steps[1].probability == 0.0 and run.steps[1].base_probability > 0  # greedy would never pick it
    prefix = [full.steps[0].token_id, alternative.id]
    assert run.token_ids[2:] == hf_greedy(loaded, ids + prefix, 4)
    assert run.token_ids != full.token_ids[:6]


def test_seeded_sampling_is_reproducible(loaded):
    ids = chat_ids(loaded, "Say hi")
    hot = SamplingSettings(temperature=1.5, seed=11)
    first, again = generate(loaded, ids, hot, 6), generate(loaded, ids, hot, 6)
    assert first.token_ids == again.token_ids
    others = {tuple(generate(loaded, ids, SamplingSettings(temperature=1.5, seed=s), 6).token_ids) for s in (1, 2)}
    assert len(others | {tuple(first.token_ids)}) > 1
    assert all(step.probability > 0 for step in first.steps)
    top1 = generate(loaded, ids, SamplingSettings(temperature=1.0, top_k=1, seed=5), 4)
    assert top1.token_ids == generate(loaded, ids, GREEDY, 4).token_ids


def test_alternatives_are_ranked_and_include_the_chosen_token(loaded):
    run = generate(loaded, chat_ids(loaded, "Say hi"), SamplingSettings(temperature=1.0, top_k=3, seed=3), 4)
    for step in run.steps:
        alts = step.alternatives
        assert len(alts) == 5 and step.token_id in [c.id for c in alts]
        assert [c.probability for c in alts] == sorted((c.probability for c in alts), reverse=True)
        assert sum(c.probability > 0 for c in alts) == 3  # top-k 3 keeps exactly three
        assert sum(c.probability for c in alts) == pytest.approx(1.0)
        assert [c.rank for c in alts] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("settings", [SamplingSettings(temperature=0.7, top_k=50), SamplingSettings(temperature=0),
                                      SamplingSettings(temperature=1.2, top_p=0.9)])
def test_an_alternative_s_rank_counts_every_token_ahead_of_it(settings):
    """Ranks by final probability, ties broken by base probability (tokens tied on both share a rank), for a
    chosen token far down the list too (here among the many tokens sampling removed, all at final probability 0)."""
    logits = np.random.default_rng(11).standard_normal(4096).astype(np.float32) * 4
    logits[:40] = logits.max()  # a tie at the top
    sampled = apply_sampling(logits, settings)
    final, base = sampled.final_probs, sampled.base_probs
    for chosen in (int(np.argsort(-logits, kind="stable")[1000]), int(np.argmax(logits))):
        alts = alternatives(sampled, chosen, str)
        assert chosen in [c.id for c in alts]
        for c in alts:
            ahead = (final > final[c.id]) | ((final == final[c.id]) & (base > base[c.id]))
            assert c.rank == 1 + int(ahead.sum())


def test_cancellation_stops_promptly(loaded):
    seen = []
    steps = generate_steps(loaded, chat_ids(loaded, "Say hi"), GREEDY, 50, cancelled=lambda: len(seen) >= 2)
    for step in steps:
        seen.append(step)
    assert len(seen) == 3 and seen[-1].finished == "cancelled"
    before = generate(loaded, chat_ids(loaded, "Say hi"), GREEDY, 50, cancelled=lambda: True)
    assert before.finish_reason == "cancelled" and before.steps == []


def test_model_lock_is_free_while_the_consumer_holds_a_step(loaded):
    steps = generate_steps(loaded, chat_ids(loaded, "Say hi"), GREEDY, 3)
    next(steps)
    acquired = []
    other = threading.Thread(target=lambda: acquired.append(loaded.lock.acquire(timeout=5) and loaded.lock.release() is None))
    other.start()
    other.join()
    assert acquired == [True]
    assert len(list(steps)) == 2


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"prompt_ids": []}, "messages"),
        ({"prompt_ids": [1, 10**6]}, "messages"),
        ({"forced": {0: -3}}, "forced"),
        ({"stop": [""]}, "stop"),
        ({"settings": SamplingSettings(temperature=3.0)}, "temperature"),
    ],
)
def test_bad_input_raises_before_any_model_work(loaded, kwargs, param):
    call = {"prompt_ids": [1, 2, 3], "settings": GREEDY, "max_tokens": 4, **kwargs}
    with pytest.raises(LifecycleError) as error:
        generate_steps(loaded, **call)  # raising here, not on first next(), lets an API answer 400 first
    assert error.value.param == param


def test_prompt_over_the_context_window_is_rejected(loaded):
    with pytest.raises(LifecycleError) as error:
        generate_steps(loaded, [1] * (loaded.context_window - 3), GREEDY, 4)
    assert error.value.code == "context_length_exceeded"
