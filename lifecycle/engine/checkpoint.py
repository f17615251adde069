"""A plain Llama checkpoint read straight from its files, without transformers' modeling code.

Importing transformers' Llama model (or even its config class) pulls in ``torch.distributed.tensor``
and ``torch._dynamo``: measured on this 2-core machine, ~2.5 s of CPU of a ~4.5 s start. The engine
needs none of it, only the tensors and a few config facts. So for the fp32 copy the app itself wrote,
``read_checkpoint`` gives the weights as a tree of namespaces with the Hugging Face names
(``model.layers[3].self_attn.q_proj.weight``), which ``LlamaStack`` reads exactly as it reads a
Hugging Face model; ``hugging_face_model`` builds the real model later (the pages' hooks need it)
on those very tensors, so the weights still exist once.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

WEIGHTS_FILE = "model.safetensors"


class Module(SimpleNamespace):
    """One module of the tree: its ``weight`` (and ``bias``, None when the checkpoint has none)."""

    bias = None


class DefaultRope:
    """The original RoPE (``rope_type`` "default"), computed as transformers' rotary module does."""

    def __init__(self, config: SimpleNamespace):
        base = float(config.rope_parameters["rope_theta"])
        dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))

    def __call__(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def plain_config(directory: Path) -> SimpleNamespace | None:
    """``config.json`` as attributes when it describes a Llama this reader handles (default RoPE,
    SiLU, one tensor-parallel slice), else None (such a model loads through transformers)."""
    config = SimpleNamespace(**json.loads((directory / "config.json").read_text()))
    rope = getattr(config, "rope_parameters", None) or {}
    plain = (getattr(config, "architectures", None) == ["LlamaForCausalLM"] and rope.get("rope_type") == "default"
             and "rope_theta" in rope and getattr(config, "hidden_act", "silu") == "silu"
             and int(getattr(config, "pretraining_tp", 1) or 1) == 1)
    return config if plain else None


def read_checkpoint(directory: Path) -> SimpleNamespace | None:
    """The checkpoint in ``directory`` as a module tree shaped like ``LlamaForCausalLM`` (``config``,
    ``model.embed_tokens``, ``model.layers``, ``model.norm``, ``model.rotary_emb``, ``lm_head``),
    or None when ``plain_config`` declines it."""
    from safetensors.torch import load_file

    config = plain_config(directory)
    if config is None:
        return None
    root = SimpleNamespace(config=config, model=SimpleNamespace(layers=[Module() for _ in range(config.num_hidden_layers)]))
    for name, tensor in load_file(directory / WEIGHTS_FILE).items():
        *path, leaf = name.split(".")
        node = root
        for part in path:
            node = node[int(part)] if part.isdigit() else _child(node, part)
        setattr(node, leaf, torch.nn.Parameter(tensor.float(), requires_grad=False))
    if getattr(config, "tie_word_embeddings", False) or not hasattr(root, "lm_head"):
        root.lm_head = Module(weight=root.model.embed_tokens.weight)
    root.model.rotary_emb = DefaultRope(config)
    return root


def parameters(tree: SimpleNamespace) -> list[torch.Tensor]:
    """The tree's distinct weight tensors (a tied head counted once), as ``Module.parameters()`` gives them."""
    found: dict[int, torch.Tensor] = {}

    def walk(node) -> None:
        children = node if isinstance(node, list) else vars(node).values()
        for child in children:
            if isinstance(child, torch.Tensor):
                found.setdefault(id(child), child)
            elif isinstance(child, (list, SimpleNamespace)):
                walk(child)

    walk(tree.model)
    walk(tree.lm_head)
    return list(found.values())


def _child(node, name: str):
    if not hasattr(node, name):
        setattr(node, name, Module())
    return getattr(node, name)


def hugging_face_model(tree: SimpleNamespace, directory: Path):
    """The transformers model of ``directory`` whose parameters are the tree's own tensors (as they
    are now: views of the engine's fused matrices once it is built), in eval mode, eager attention."""
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    config = AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    state = {name: _lookup(tree, name) for name in model.state_dict()}
    model.load_state_dict(state, assign=True, strict=True)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=model.config)  # its buffers are not saved
    left = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"no tensor in the checkpoint for {', '.join(left)}")
    model.generation_config = GenerationConfig.from_pretrained(directory)
    return model.eval()


def _lookup(tree: SimpleNamespace, name: str) -> torch.Tensor:
    node = tree
    for part in name.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node
