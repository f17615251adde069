"""Every sentence true on the Attention and Forward pass pages: what they state, against a recomputation.

For two prompts the pages run under AppTest; this file recomputes what they state with a plain
transformers forward pass of the loaded model (``output_attentions``, and its own forward hooks on the
decoder layers, attention and MLP modules), the tokenizer's own ``apply_chat_template`` and arithmetic
from the model's config: never the pages' helpers (lifecycle.stages.forward_pass, lifecycle.stages.block, charts.live_*).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import browser_idle, markdowns, run_page
from tests.pages.recompute import template_ids
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
PRONOUN_SENTENCE = "The programmer fixed the bug because it caused crashes."


def _text(app) -> str:
    return " | ".join([m for m in markdowns(app)] + [c.value for c in app.caption]).replace("\\", "")




def _shown(loaded, token_id: int) -> str:
    return show_token(reference_tokenizer(loaded).decode([token_id]))


def _recomputed(loaded, ids: list[int], position: int) -> dict:
    """One transformers forward pass: every layer's attention, and at ``position`` the residual stream
    entering each layer, each layer's attention and MLP outputs and its output; the final logits."""
    inner = loaded.model.model
    seen: dict = {"input": {}, "attention": {}, "mlp": {}, "output": {}}
    handles = []
    for index, layer in enumerate(inner.layers):
        handles += [
            layer.register_forward_pre_hook(
                lambda _m, args, i=index: seen["input"].__setitem__(i, args[0][0, position].double().clone())),
            layer.self_attn.register_forward_hook(
                lambda _m, _a, out, i=index: seen["attention"].__setitem__(i, out[0][0, position].double().clone())),
            layer.mlp.register_forward_hook(
                lambda _m, _a, out, i=index: seen["mlp"].__setitem__(i, out[0, position].double().clone())),
            layer.register_forward_hook(
                lambda _m, _a, out, i=index: seen["output"].__setitem__(
                    i, (out[0] if isinstance(out, tuple) else out)[0, position].double().clone())),
        ]
    try:
        with loaded.lock, torch.inference_mode():
            result = loaded.model(input_ids=torch.tensor([ids]), output_attentions=True)
            outputs = torch.stack([seen["output"][i] for i in range(len(inner.layers))])
            lens = torch.softmax(loaded.model.lm_head(inner.norm(outputs.float())).double(), -1)
    finally:
        for handle in handles:
            handle.remove()
    layers = len(inner.layers)
    return {
        "attentions": np.stack([a[0].double().numpy() for a in result.attentions]),  # (layers, heads, n, n)
        "inputs": [seen["input"][i].numpy() for i in range(layers)],
        "attention_adds": np.array([float(seen["attention"][i].norm()) for i in range(layers)]),
        "mlp_adds": np.array([float(seen["mlp"][i].norm()) for i in range(layers)]),
        "outputs": [seen["output"][i].numpy() for i in range(layers)],
        "lens": lens.numpy(),
        "next": torch.softmax(result.logits[0, position].double(), -1).numpy(),
    }


@pytest.fixture(scope="module", params=PROMPTS)
def prompt(request):
    return request.param


@pytest.fixture(scope="module")
def ids(loaded, prompt):
    return template_ids(loaded, prompt)


@pytest.fixture(scope="module")
def truth(loaded, ids):
    return _recomputed(loaded, ids, len(ids) - 1)


def test_the_attention_page_states_the_models_own_attention(loaded, prompt, ids, truth):
    app = run_page("attention", prompt=prompt, temperature=0)
    assert not app.exception and not app.error
    text = _text(app)
    config = loaded.model.config
    maps = truth["attentions"]
    n = len(ids)
    assert maps.shape == (config.num_hidden_layers, config.num_attention_heads, n, n)
    assert f"Each of the **{n} tokens**" in text
    assert f"Here {maps[..., 0].mean():.0%} of all attention lands on the first token '{_shown(loaded, ids[0])}'" in text
    look = maps[:, :, -1, 1:-1]
    layer, head, key = np.unravel_index(int(look.argmax()), look.shape)
    assert (f"the last token '{_shown(loaded, ids[-1])}' attends most to '{_shown(loaded, ids[key + 1])}' "
            f"(**{look.max():.0%}**, layer {layer}, head {head}, shown first)") in text
    # The facts from the config.
    group = config.num_attention_heads // config.num_key_value_heads
    assert (f"In each of its **{config.num_hidden_layers} layers**, **{config.num_attention_heads} attention heads**"
            in text)
    assert f"{config.num_key_value_heads} sets of keys and values, {group} query heads per set" in text
    assert f"shrinks the KV cache {group}x" in text
    # What the browser gets: 16-bit codes of every map's lower triangle, in base64.
    raw = config.num_hidden_layers * config.num_attention_heads * n * (n + 1) // 2 * 2
    assert f"({math.ceil(raw / 3) * 4 / 1024:,.0f} KiB for this prompt)" in text
    # The logit lens: the model's answer and the first layer whose top guess it is.
    answer = int(truth["next"].argmax())
    assert f"The full model's answer is '{_shown(loaded, answer)}' ({truth['next'][answer]:.0%})" in text
    tops = truth["lens"].argmax(-1)
    first = next((i for i, top in enumerate(tops) if top == answer), None)
    if first is not None:
        assert f"it first comes out on top at layer {first} of 0-{len(tops) - 1}" in text


def test_the_pronoun_example_is_the_strongest_head_of_all(loaded):
    app = run_page("attention", prompt=PROMPTS[0], temperature=0)
    ids = reference_tokenizer(loaded).encode(PRONOUN_SENTENCE, add_special_tokens=False)
    texts = [reference_tokenizer(loaded).decode([i]) for i in ids]
    it, bug = texts.index(" it"), texts.index(" bug")
    with loaded.lock, torch.inference_mode():
        maps = np.stack([a[0].double().numpy() for a in
                         loaded.model(input_ids=torch.tensor([ids]), output_attentions=True).attentions])
    layer, head = np.unravel_index(int(maps[:, :, it, bug].argmax()), maps.shape[:2])
    text = _text(app)
    assert (f"in **layer {layer}, head {head}**, the token '␣it' puts **{maps[layer, head, it, bug]:.0%}** of its "
            f"attention on '␣bug'") in text
    assert f"the strongest such head of all {maps.shape[0] * maps.shape[1]}" in text


def test_the_forward_pass_page_states_the_models_own_residual_stream(loaded, prompt, ids, truth):
    app = browser_idle(run_page("forward-pass", prompt=prompt, temperature=0), "forward_fill")  # every tab built
    assert not app.exception and not app.error
    text = _text(app)
    config = loaded.model.config
    n, position, layers = len(ids), len(ids) - 1, config.num_hidden_layers
    # The lesson: the stream's length at the embedding and after the last block, the largest addition.
    embedding = float(np.linalg.norm(truth["inputs"][0]))
    last = float(np.linalg.norm(truth["outputs"][-1]))
    assert f"The prompt's **{n} tokens** pass through **{layers} blocks**" in text
    assert (f"At token '{_shown(loaded, ids[position])}' (position {position}) the stream's length goes from "
            f"{embedding:,.1f} (the embedding) to {last:,.1f} after the last block") in text
    adds = np.maximum(truth["attention_adds"], truth["mlp_adds"])
    biggest = int(adds.argmax())
    part = "MLP" if truth["mlp_adds"][biggest] >= truth["attention_adds"][biggest] else "attention"
    assert f"the largest single addition is layer {biggest}'s {part} (length {adds[biggest]:,.1f})" in text
    # The details open the middle block at head 0 (the default view).
    middle = layers // 2
    assert f"open block **{middle}** at head **0**" in text
    block_input = truth["inputs"][middle]
    assert f"The token's vector has root-mean-square {math.sqrt(np.mean(block_input ** 2)):.3f}" in text
    weights = truth["attentions"][middle, 0, position]
    top = int(weights.argmax())
    assert (f"Softmax turns the {position + 1} visible scores into weights that sum to 1; the largest, "
            f"{weights[top]:.1%}, goes to '{_shown(loaded, ids[top])}' (position {top})") in text
    assert "this is the last token, so nothing is masked" in text
    # RoPE's angle for pair 0 from the config: position / theta^0 radians.
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    angle = position / config.rope_parameters["rope_theta"] ** (0 / head_dim)
    found = re.search(r"= \*\*([0-9.]+) rad\*\*", text)
    assert found and float(found.group(1)) == pytest.approx(angle, abs=5e-5)
    assert f"√{head_dim} = {math.sqrt(head_dim):.0f}" in text
    # The logit lens at this token: the answer, and the layer from which the lens's top guess stays it.
    answer = int(truth["next"].argmax())
    tops = truth["lens"].argmax(-1)
    settle = layers
    while settle > 0 and tops[settle - 1] == answer:
        settle -= 1
    assert f"the model's answer after this token is '{_shown(loaded, answer)}'" in text
    assert (f"the lens's top guess from layer {settle} on" in text if settle < layers - 1
            else "the top guess only at the very last layer" in text)
