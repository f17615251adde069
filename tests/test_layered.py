"""The inspection pass one decoder layer at a time is the model's own forward pass, bit for bit."""

import torch

from lifecycle.engine import shared_engine
from lifecycle.engine.layered import layered_forward, run_through, timed


def test_layer_by_layer_logits_equal_the_models_forward(loaded):
    ids = loaded.tokenizer("The quick brown fox jumps over the lazy dog because", add_special_tokens=False)["input_ids"]

    def both(model):
        with torch.inference_mode():
            whole = model(torch.tensor([ids]), use_cache=False, logits_to_keep=3).logits
        return whole, run_through(layered_forward(model, ids, logits_to_keep=3))

    whole, layered = shared_engine(loaded).run(both)
    assert layered.shape == whole.shape == (1, 3, loaded.vocab_size)
    assert torch.equal(layered, whole)


def test_the_pass_yields_once_per_decoder_layer_and_times_only_its_slices(loaded):
    def count(model):
        slices, yielded = timed(layered_forward(model, [1, 2, 3, 4])), 0
        while True:
            try:
                next(slices)
                yielded += 1
            except StopIteration as finished:
                return yielded, *finished.value

    yielded, logits, seconds = shared_engine(loaded).run(count)
    assert yielded == loaded.num_layers
    assert logits.shape == (1, 1, loaded.vocab_size) and seconds > 0
