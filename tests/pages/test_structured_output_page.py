"""The Structured output page under AppTest: a real constrained tool call and a json_schema answer."""

import json

from lifecycle.features.structured import follow_call
from lifecycle.features.tools import output_rules
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import component_data, markdowns

PROMPT = "What's the weather in Paris?"
SETTINGS = dict(prompt=PROMPT, temperature=0.0, max_tokens=8, seed=1)


def test_a_required_tool_call_is_followed_to_its_validated_arguments(run_page, loaded):
    app = run_page("structured-output", **SETTINGS)
    assert not app.exception and not app.error
    rules = output_rules(tools=json.loads(app.text_area(key="structured_tools").value), tool_choice="required")
    from lifecycle.stages.sampling import SamplingSettings

    run = follow_call(loaded, [{"role": "user", "content": PROMPT}], rules, SamplingSettings(temperature=0.0, seed=1), 120)
    assert run.finish_reason == "tool_calls" and run.valid
    (view,) = component_data(app, "structured_mask")["views"]
    allowed = [row["segments"][0]["value"] for row in view["rows"]]
    assert allowed == [s.allowed for s in run.steps]
    assert max(allowed) < loaded.vocab_size == view["line"]["at"]
    assert [row["segments"][0]["series"] for row in view["rows"]] == [int(not s.model_choice_allowed) for s in run.steps]
    text = " ".join(m for m in markdowns(app))
    assert f"cost **{run.tool_tokens:,} prompt tokens**" in text and f"took **{len(run.steps)} tokens**" in text
    allowed = [s.allowed for s in run.steps]
    assert f"between **{min(allowed):,}** and **{max(allowed):,}** of the {loaded.vocab_size:,} tokens" in text
    assert f"**{allowed.count(1)}** steps had exactly one allowed token" in text
    overruled = sum(not s.model_choice_allowed for s in run.steps)
    assert f"at **{overruled}** steps the model's own favourite was masked out" in text
    assert f"finish_reason: **{run.finish_reason}**" in text
    table = app.dataframe[0].value
    rows = [(s.index + 1, show_token(s.token)) for s in run.steps for _ in s.deltas]
    assert list(zip(table["step"], table["token"])) == rows[: len(table)]
    deltas = [json.loads(d) for d in app.dataframe[0].value["chunk delta"]]
    head = deltas[0]["tool_calls"][0]
    assert head["function"] == {"name": run.tool_calls[0]["function"]["name"], "arguments": ""}
    fragments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert fragments == run.tool_calls[0]["function"]["arguments"]
    assert any("validates against its schema" in s.value for s in app.success)


def test_json_schema_mode_and_a_bad_schema(run_page):
    app = run_page("structured-output", **SETTINGS)
    app.segmented_control(key="structured_mode").set_value("JSON matching a schema").run()
    assert not app.exception and not app.error
    assert any("validates against its schema" in s.value for s in app.success)
    assert "costs no prompt tokens here" in " ".join(m for m in markdowns(app))
    app.text_area(key="structured_schema").set_value('{"type": "object", "if": {}}').run()
    assert not app.exception
    assert "if" in app.error[0].value and "schema" in app.error[0].value


def test_the_page_links_to_the_agent_loop(run_page):
    app = run_page("structured-output", **SETTINGS)
    assert not app.exception
    assert "agent" in [link.proto.page for link in app.get("page_link")]  # its url_path
