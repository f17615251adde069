"""Context window page under AppTest: the budget bars, the rendered template, the tools and
documents editors and the truncation demo, checked against lifecycle computed here."""

import json

import pytest

from lifecycle.stages.context_window import CONTEXT_WINDOWS, Conversation, context_budget, render_prompt, truncate_oldest_turns
from tests.pages.harness import component_data, components, details_drawn, markdowns, run_page, texts

PROMPT = "Why is the sky blue?"
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def page(loaded):
    app = run_page("context-window", prompt=PROMPT, max_tokens=MAX_TOKENS)
    assert not app.exception
    return app


def charts(app) -> list[dict]:
    """The budget bars the page drew this run (ui.live_bars), in page order: the budget, then the overflow demo's."""
    return [component_data(app, key) for key in ("context_budget", "context_overflow") if components(app, key)]


def traces(chart: dict) -> dict[str, list]:
    """Each part's tokens per row (0 where a row has none of it), as a stacked bar draws them."""
    rows = chart["views"][0]["rows"]
    return {series["name"]: [next((s["value"] for s in row["segments"] if s["series"] == index), 0) for row in rows]
            for index, series in enumerate(chart["series"])}


def window_line(chart: dict) -> float:
    return chart["views"][0]["line"]["at"]


def test_budget_of_this_run_matches_lifecycle(page, loaded):
    prompt = render_prompt(Conversation(PROMPT))
    budget = context_budget(prompt, loaded.context_window, MAX_TOKENS)
    assert f"receives **{budget.prompt_tokens:,}**" in markdowns(page)[1]
    assert f"**{budget.free:,} tokens stay free**" in markdowns(page)[1]
    bars = traces(charts(page)[0])
    assert bars["template overhead"][0] == next(s.tokens for s in prompt.segments if s.name == "template")
    assert bars["new message"][0] == next(s.tokens for s in prompt.segments if s.name == "new message")
    assert bars["output reserve"][0] == MAX_TOKENS and bars["free"][0] == budget.free
    assert window_line(charts(page)[0]) == loaded.context_window


def test_a_new_tab_draws_the_budget_alone_then_its_controls_and_the_rest(loaded):
    """The first run holds the budget and no element whose code the browser would load before drawing it (a widget,
    a table); the next run adds the window choice, the boxes, the table and the overflow demo, around the same bars."""
    first = run_page("context-window", drawn=False, prompt=PROMPT, max_tokens=MAX_TOKENS)
    assert not first.exception
    assert not (first.radio or first.text_area or first.table or first.number_input or first.checkbox)
    drawn = details_drawn(first)
    assert not drawn.exception
    assert drawn.radio(key="context_window").value == "model" and drawn.text_area(key="context_tools").value
    assert drawn.table and drawn.number_input(key="overflow_window")
    assert charts(first)[0] == charts(drawn)[0]  # the tools and documents boxes' examples counted from the start


def test_rendered_template_shows_the_special_tokens_as_text(page):
    code = page.code[0].value
    assert code.rstrip("\n") == render_prompt(Conversation(PROMPT)).text.rstrip("\n")
    assert code.count("<|im_start|>") == 3 and code.count("<|im_end|>") == 2


def test_tools_and_documents_add_their_tokens(page):
    tool = {"name": "lookup", "description": "Look a word up in the dictionary."}
    page.text_area(key="context_tools").set_value(json.dumps([tool]))
    page.text_area(key="context_documents").set_value("First document.\n---\nSecond document.")
    page.radio(key="context_window").set_value("32k").run()
    assert not page.exception
    expected = render_prompt(Conversation(PROMPT, tools=[tool], documents=["First document.", "Second document."]))
    budget = context_budget(expected, CONTEXT_WINDOWS["32k"], MAX_TOKENS)
    bars = traces(charts(page)[0])
    tokens = {s.name: s.tokens for s in expected.segments}
    assert bars["tool descriptions"] == [0, tokens["tool descriptions"]]
    assert bars["retrieved documents"] == [0, tokens["retrieved documents"]]
    assert bars["free"][1] == budget.free
    table = page.table[0].value
    assert list(table.loc["tool descriptions"]) == [0, tokens["tool descriptions"]]
    assert list(table.loc["template overhead"]) == [tokens["template"]] * 2
    assert window_line(charts(page)[0]) == CONTEXT_WINDOWS["32k"]


def test_bad_tool_json_is_a_message(page):
    page.text_area(key="context_tools").set_value("[{not json").run()
    assert not page.exception
    assert "not valid JSON" in page.warning[0].value


def test_overflow_demo_shows_what_truncation_dropped(loaded):
    history = "user: " + "Tell me a long story about dragons. " * 12 + "\nassistant: Once upon a time.\nuser: More!\nassistant: The end."
    app = run_page("context-window", prompt=PROMPT, max_tokens=MAX_TOKENS, history=history)
    app.checkbox(key="overflow_example").set_value(False)
    app.number_input(key="overflow_window").set_value(128).run()
    assert not app.exception
    turns = [{"role": role, "content": content} for role, content in (
        ("user", ("Tell me a long story about dragons. " * 12).strip()), ("assistant", "Once upon a time."),
        ("user", "More!"), ("assistant", "The end."))]
    cut = truncate_oldest_turns(Conversation(PROMPT, history=turns), 128, MAX_TOKENS)
    assert len(cut.dropped) == 2
    dropped = app.table[-2].value
    assert list(dropped["content"]) == [m["content"] for m in cut.dropped]
    assert list(app.table[-1].value["content"]) == ["More!", "The end."]
    bars = traces(charts(app)[-1])
    assert bars["free"] == [0, cut.budget.free]
    assert f"removes **2 of 4 history messages**" in " ".join(m for m in markdowns(app))


def test_window_too_small_even_after_truncation_is_a_message(loaded):
    app = run_page("context-window", prompt=PROMPT, max_tokens=MAX_TOKENS)
    app.number_input(key="overflow_window").set_value(32).run()
    assert not app.exception
    assert any("even with all history dropped" in w.value for w in app.warning)
    assert PROMPT in texts(app)
