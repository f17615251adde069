"""Home / journey map: each stage's line and the waterfall show this run's own measured figures."""

import json
import re

import pytest

from lifecycle.features.call_timeline import HANDOVER, SETUP, WAIT
from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.tokenization import tokenize
from ui.stages import STAGES
from tests.pages.harness import markdowns

PROMPT = "Say hi."
MAX_TOKENS = 3  # the greedy answer is longer, so the run ends with finish_reason "length"


@pytest.fixture(scope="module")
def home(loaded):
    from tests.pages.harness import run_page

    return run_page("", prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS)


def _captions(app) -> str:
    return " | ".join(c.value for c in app.caption)


def _ms(match: re.Match) -> float:
    """A figure as the page writes it ("218.4 ms" or "12.3 s"), in ms."""
    value = float(match.group(1).replace(",", ""))
    return value * 1000 if match.group(2) == "s" else value


def _waterfall(app) -> dict:
    return json.loads(next(c for c in app.get("plotly_chart") if c.proto.id.endswith("waterfall")).proto.spec)


def test_every_stage_has_a_link_and_a_line_with_this_runs_figures(home):
    assert not home.exception and not home.error
    titles = {page.title for page in STAGES}
    links = [link for link in home.get("page_link") if link.proto.label in titles]  # the map, not Next/replay
    assert [link.proto.page for link in links] == [page.url_path for page in STAGES]
    captions = _captions(home)
    assert f"{tokenize(PROMPT).count:,} tokens in" in captions
    prompt_ids = len(render_prompt(Conversation(new_message=PROMPT)).ids)
    assert f"Prefill: {prompt_ids:,} tokens in" in captions
    assert f"Decode: {MAX_TOKENS} tokens" in captions and "(length)" in captions
    # role chunk + one content delta per token (no split characters here) + finish + usage + [DONE]
    assert f"{1 + MAX_TOKENS + 3} SSE events (with a usage chunk)" in captions


def test_waterfall_is_the_calls_own_clock_and_matches_the_lines(home):
    spec = _waterfall(home)
    bar = spec["data"][0]
    stages = [label.replace("<br>", " ") for label in bar["y"]]  # long names are drawn on two lines
    assert stages == [SETUP, WAIT, "prefill", HANDOVER,
                      *[f"decode {i}" for i in range(1, MAX_TOKENS + 1)], "last frames"]
    widths = dict(zip(stages, bar["x"]))
    assert bar["base"] == pytest.approx([sum(bar["x"][:i]) for i in range(len(bar["x"]))])
    captions = _captions(home)
    prefill = _ms(re.search(r"Prefill: [\d,]+ tokens in ([\d,.]+) (ms|s)\b", captions))
    assert widths["prefill"] == pytest.approx(prefill, abs=0.05, rel=0.01)
    mean = _ms(re.search(r"Decode: [\d,]+ tokens, ([\d,.]+) (ms|s) each", captions))
    decode = [widths[f"decode {i}"] for i in range(1, MAX_TOKENS + 1)]
    assert sum(decode) / MAX_TOKENS == pytest.approx(mean, abs=0.05, rel=0.01)
    # The bars end at the stream's last event, the total the lesson states.
    total = _ms(re.search(r"call took \*\*([\d,.]+) (ms|s)\*\*", " ".join(m for m in markdowns(home))))
    assert sum(bar["x"]) == pytest.approx(total, abs=0.06)
    assert "inspection" not in " ".join(stages)
    assert [t["name"] for t in spec["data"][1:]] == [
        "The client and the API", "Waiting for the engine", "Inside the model", "Back to the client"]
