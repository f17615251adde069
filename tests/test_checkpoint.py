"""The fp32 copy read without transformers' modeling code: the engine and the Hugging Face model
built on it compute what transformers' own loader gives, on one copy of the weights."""

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from lifecycle.engine.checkpoint import hugging_face_model, parameters, plain_config, read_checkpoint
from lifecycle.engine.llama import KVCache, LlamaStack, Segment
from lifecycle.model import default_cache_dir

IDS = [1, 504, 3458, 282, 3303, 30, 216]


@pytest.fixture(scope="module")
def reference():
    """The copy as transformers loads it (its own config class, rotary module and loader)."""
    model = AutoModelForCausalLM.from_pretrained(default_cache_dir(), dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def _stack_logits(stack: LlamaStack) -> torch.Tensor:
    cache = stack.new_cache(len(IDS))
    return stack.forward([Segment(IDS, 0, cache, True)])[0]


def test_the_engine_built_from_the_tree_computes_the_models_logits(reference):
    tree_stack, model_stack = LlamaStack(read_checkpoint(default_cache_dir())), LlamaStack(reference)
    # Each stack times its one-row kernels when built, and on a busy machine two builds can choose differently
    # for the output head (oneDNN or gemv.c: the same product, rounded apart). The same weights through the same
    # kernel give the same bits.
    tree_stack.linear = model_stack.linear = F.linear
    from_tree, from_model = _stack_logits(tree_stack), _stack_logits(model_stack)
    assert torch.equal(from_tree, from_model)
    with torch.inference_mode():
        hf = reference(torch.tensor([IDS])).logits[0, -1]
    assert torch.allclose(from_tree, hf, atol=1e-4 * float(hf.abs().max()), rtol=0)  # other kernels, fp32 rounding


def test_the_hugging_face_model_is_built_on_the_engines_tensors(reference):
    tree = read_checkpoint(default_cache_dir())
    stack = LlamaStack(tree)
    model = hugging_face_model(tree, default_cache_dir())
    attention = model.model.layers[4].self_attn
    assert attention.q_proj.weight.data_ptr() == stack.blocks[4].qkv.data_ptr()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in parameters(tree))
    assert model.generation_config.eos_token_id == reference.generation_config.eos_token_id
    with torch.inference_mode():
        ids = torch.tensor([IDS])
        assert torch.equal(model(ids).logits, reference(ids).logits)


def test_a_config_it_does_not_know_is_left_to_transformers(tmp_path):
    config = json.loads((default_cache_dir() / "config.json").read_text())
    assert plain_config(default_cache_dir()) is not None
    for change in ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e5, "factor": 2.0}},
                   {"architectures": ["MistralForCausalLM"]}, {"hidden_act": "gelu"}):
        (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
        assert plain_config(tmp_path) is None
        assert read_checkpoint(tmp_path) is None


def test_the_start_imports_no_modeling_code():
    """Loading the default model and building its engine leaves transformers' model classes (and the
    torch._dynamo / torch.distributed they import) unimported; the first use of ``.model`` imports them."""
    probe = ("import sys\n"
             "from lifecycle.model import load_model\n"
             "from lifecycle.engine import shared_engine\n"
             "loaded = load_model(); shared_engine(loaded)\n"
             "heavy = ('transformers.models.llama.modeling_llama', 'torch._dynamo', 'torch.distributed.tensor')\n"
             "print([m in sys.modules for m in heavy], loaded.hf_model is None)\n"
             "loaded.model\n"
             "print([m in sys.modules for m in heavy])\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[False, False, False] True"
    assert out[1] == "[True, True, True]"
