"""A truncated copy of the real model, and every page and the API run on it in a process of its own.

``save_truncated_model`` writes the real SmolLM2's first ``LAYERS`` layers with a ``WINDOW``-position
window in its config, as a model folder ``LIFECYCLE_MODEL`` can name. ``python -m tests.truncated_model
FOLDER`` then opens every page under AppTest and calls the API with that folder as the app's model,
and prints what they showed as JSON (tests/test_model_facts.py reads it): a separate process, because
the model is loaded once per process and the rest of the suite shares the real one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

LAYERS = 2
WINDOW = 2048
# Any model fact the real SmolLM2-135M-Instruct has and this copy does not, as a page could write it.
REAL_FACTS = ("30 layers", "30 transformer", "30 × 9", "30 x 9", "270 heads", "8,192", "8192")


def save_truncated_model(source: str, target: Path) -> Path:
    """The model at ``source`` cut to its first ``LAYERS`` layers, with a ``WINDOW``-token window, saved
    (weights, config, tokenizer) in ``target``; the rest of its weights and config are the real ones."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, num_hidden_layers=LAYERS,
                                                 max_position_embeddings=WINDOW)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def shown_text(app) -> list[str]:
    """Every string a page sent to the browser (text, Markdown, labels, help, options, table cells),
    except charts' figure JSON: the page's words, wherever they are."""
    from google.protobuf.json_format import MessageToDict

    found: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and getattr(node, "type", "") != "plotly_chart":
            found.extend(_strings(MessageToDict(proto)))
        children = getattr(node, "children", {})
        for child in (children.values() if isinstance(children, dict) else children):
            walk(child)

    walk(app.sidebar)
    walk(app.main)
    return found


def run_pages() -> dict[str, dict]:
    """Every page (home and each stage) opened as a deep link, like tests/pages do."""
    from tests.pages.harness import run_page
    from ui.stages import STAGES

    pages = {}
    for url_path in ["", *[stage.url_path for stage in STAGES]]:
        app = run_page(url_path, prompt="What's the capital of India?", max_tokens=4)
        pages[url_path or "home"] = {
            "exceptions": [e.value for e in app.exception],
            "errors": [e.value for e in app.error],
            "text": shown_text(app),
        }
    return pages


def run_api(long_prompt_tokens: int) -> dict:
    """/v1/models, a short call and one longer than the window, on the API the app serves."""
    import httpx

    from tests.test_api import KEY, make_server, serve

    headers = {"authorization": f"Bearer {KEY}"}
    with tempfile.TemporaryDirectory() as folder, serve(make_server(Path(folder))) as url:
        models = httpx.get(f"{url}/v1/models", headers=headers, timeout=60).json()
        model = models["data"][0]["id"]

        def call(content: str) -> dict:
            body = {"model": model, "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": content}]}
            reply = httpx.post(f"{url}/v1/chat/completions", headers=headers, json=body, timeout=300)
            return {"status": reply.status_code, "body": reply.json()}

        return {"models": models, "short": call("Say hi."), "long": call("word " * long_prompt_tokens)}


def main(folder: str) -> None:
    os.environ["LIFECYCLE_MODEL"] = folder
    from lifecycle.model import shared_model

    loaded = shared_model()
    facts = {"name": loaded.name, "layers": loaded.num_layers, "window": loaded.context_window}
    report = {"model": facts, "pages": run_pages(), "api": run_api(WINDOW + 100)}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
