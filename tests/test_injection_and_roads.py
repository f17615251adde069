"""The system prompt measured and temperature 0's roads, each figure against transformers run
directly on the cached model (the independent reference) or a recount of the answers."""

import numpy as np
import pytest
import torch

from lifecycle.stages.context_window import render_messages
from lifecycle.features.determinism import compare_roads
from lifecycle.engine import shared_engine
from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import generate
from lifecycle.features.injection import InjectionSetup, leaking_ids, measure_case, measure_injection, targets
from lifecycle.stages.sampling import SamplingSettings

def _hf_logits(loaded, ids):
    def job(model):
        with torch.inference_mode():
            return model(torch.tensor([list(ids)])).logits[0].double().numpy()

    return shared_engine(loaded).run(job)

@pytest.mark.parametrize(("field", "value", "message"), [
    ("question", "  ", "The question is empty"), ("phrase", "x" * 41, "phrase has 41 characters; at most 40"),
    ("document", "d" * 601, "document has 601 characters"), ("lead_in", "", "The lead-in is empty"),
    ("rule", "", "The rule is empty")])
def test_a_bad_setup_is_refused_naming_its_field(field, value, message):
    with pytest.raises(LifecycleError, match=message) as caught:
        InjectionSetup(**{field: value}).checked()
    assert caught.value.param == field

@pytest.mark.parametrize("draws", [0, 33, True, 2.5])
def test_the_number_of_draws_is_bounded(loaded, draws):
    with pytest.raises(LifecycleError, match="from 1 to 32"):
        measure_injection(loaded, InjectionSetup(), draws)

def test_the_leaking_tokens_are_those_that_start_the_phrase(loaded):
    found = set(leaking_ids(loaded, "New Delhi").tolist())
    special = set(loaded.tokenizer.all_special_ids)
    wanted = targets("New Delhi")
    with loaded.tokenizer_lock:
        texts = loaded.tokenizer.convert_ids_to_tokens(list(range(len(loaded.tokenizer))))
    # byte-level BPE: "Ġ" is a leading space; decode the pieces independently of the app's byte table
    expected = {i for i, piece in enumerate(texts) if i not in special
                and (text := piece.replace("Ġ", " ").lstrip().casefold())
                and any(t.startswith(text) or text.startswith(t) for t in wanted)}
    assert found == expected and len(found) > 3

def test_one_case_against_transformers_and_a_recount(loaded):
    setup = InjectionSetup().checked()
    ids = leaking_ids(loaded, setup.phrase)
    result = measure_case(loaded, setup, "rule in the system prompt", 3, ids)
    prompt = render_messages(setup.messages("rule in the system prompt")).ids
    assert result.prompt_tokens == len(prompt)
    with loaded.tokenizer_lock:
        lead = loaded.tokenizer(setup.lead_in, add_special_tokens=False)["input_ids"]
    logits = _hf_logits(loaded, [*prompt, *lead])[-1]
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert result.first_token_mass == pytest.approx(float(probabilities[ids].sum()), abs=5e-4)
    assert result.leaks == sum("delhi" in answer.lower() for answer in result.answers)
    assert len(result.answers) == 3 and len(set(result.answers)) > 1  # different seeds, different answers
    again = generate(loaded, prompt, SamplingSettings(temperature=1.0, seed=0), 24)
    assert again.text == result.answers[0]

def test_the_roads_against_transformers(loaded):
    prompt = render_messages([{"role": "user", "content": "Name a colour."}]).ids
    run = compare_roads(loaded, prompt, steps=4, chunk=5)
    served = generate(loaded, prompt, SamplingSettings(temperature=0.0), 4)
    assert run.answer_ids == served.token_ids[:4]
    logits = _hf_logits(loaded, [*prompt, *run.answer_ids[:-1]])[len(prompt) - 1:]
    assert list(logits.argmax(axis=1)) == run.answer_ids
    top = np.sort(logits, axis=1)[:, -2:]
    assert run.margins == pytest.approx(list(top[:, 1] - top[:, 0]), abs=2e-3)
    assert [r.name for r in run.roads] == ["batch", "one pass", "chunked prefill", "other threads"]
    for road in run.roads:
        assert len(road.step_differences) == 4 and road.largest < 2e-3
        assert road.changed_steps == [] or min(run.margins) < road.largest * 2
    s = run.summation
    assert s.terms == loaded.model.config.hidden_size
    assert s.exact == pytest.approx(float(logits[0, run.answer_ids[0]]), abs=2e-3)
    assert abs(s.forward - s.exact) < 1e-3 and abs(s.backward - s.exact) < 1e-3

@pytest.mark.parametrize(("steps", "chunk", "param"), [(1, 2, "steps"), (4, 0, "chunk"), (4, 10_000, "chunk")])
def test_the_roads_refuse_bad_lengths(loaded, steps, chunk, param):
    with pytest.raises(LifecycleError) as caught:
        compare_roads(loaded, render_messages([{"role": "user", "content": "Hi"}]).ids, steps=steps, chunk=chunk)
    assert caught.value.param == param
