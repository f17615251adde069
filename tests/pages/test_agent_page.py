"""The Agents page under AppTest: the loop, the system prompt measured, temperature 0's roads."""

import json

import torch

from lifecycle.stages.context_window import render_messages
from lifecycle.features.injection import CASES, InjectionSetup, leaking_ids, targets
from tests.pages.harness import markdowns, plotly_figure

SETTINGS = dict(temperature=0.0, max_tokens=8, seed=1)


def test_the_agent_loop_shows_every_round_and_the_messages_growing(run_page, loaded):
    from lifecycle.features.agent import engine_send, run_agent, run_tool, LOCAL_TOOLS

    question = "What is 17 times 23?"
    app = run_page("agent", timeout=600, **(SETTINGS | {"prompt": question}))
    assert not app.exception and not app.error
    table = next(frame.value for frame in app.dataframe if "tool result" in frame.value.columns)
    again = run_agent([{"role": "user", "content": question}], engine_send(loaded, 64), max_rounds=3)
    assert list(table["round"]) == [r.index for r in again.rounds] and len(again.rounds) == 2
    assert list(table["prompt tokens"]) == [r.prompt_tokens for r in again.rounds]
    assert list(table["messages sent"]) == [1, 3]  # the question; then it, the call and the tool's result
    assert list(table["finish_reason"]) == ["tool_calls", "stop"]
    call = again.rounds[0].reply.tool_calls[0]["function"]
    assert table["tool call"][0] == f"{call['name']}({call['arguments']})"
    assert table["tool result"][0] == json.dumps(run_tool(LOCAL_TOOLS, call["name"], call["arguments"]))
    cached = list(table["cached tokens"])
    assert 0 < cached[1] <= table["prompt tokens"][1]
    text = " ".join(m for m in markdowns(app))
    assert "made **2 calls** of the model and ended with a text answer" in text
    assert "ran **1 tool call** here (0 answered with an error)" in text
    assert (f"Round 2 re-sent **{table['prompt tokens'][1]:,} prompt tokens** for round 1's "
            f"**{table['prompt tokens'][0]:,}**, **{cached[1]:,}** of them served by the prefix cache") in text
    assert again.answer in [t.value for t in app.text] and str(17 * 23) in again.answer

    app.number_input(key="agent_rounds").set_value(1).run()
    assert not app.exception
    assert "made **1 call** of the model and reached its round limit" in " ".join(m for m in markdowns(app))


def test_the_tendency_chart_and_sentences_match_an_independent_recomputation(run_page, loaded):
    from lifecycle.engine import shared_engine

    app = run_page("agent", timeout=600, prompt="What's the capital of India?", **SETTINGS)
    assert not app.exception and not app.error
    figure = plotly_figure(app, "agent_compliance")
    first, drawn = figure.data
    setup = InjectionSetup()
    with loaded.tokenizer_lock:
        lead = loaded.tokenizer(setup.lead_in, add_special_tokens=False)["input_ids"]
    ids = leaking_ids(loaded, setup.phrase)
    for index, case in enumerate(CASES):
        prompt = render_messages(setup.messages(case)).ids

        def job(model, prompt=prompt):
            with torch.inference_mode():
                return model(torch.tensor([[*prompt, *lead]])).logits[0, -1].double().softmax(-1).numpy()

        mass = float(shared_engine(loaded).run(job)[ids].sum())
        assert abs(first.y[index] - 100 * mass) < 0.05
    counts = [int(text.split(" of ")[0]) for text in drawn.text]
    answers = [frame.value["answer"] for frame in app.dataframe if "answer" in frame.value.columns]
    assert len(answers) == len(CASES)
    recount = [sum(any(t in a.casefold() for t in targets(setup.phrase)) for a in column) for column in answers]
    assert counts == recount
    text = " ".join(m for m in markdowns(app))
    assert f"**{recount[0]} of {len(answers[0])}**" in text and f"**{recount[1]} of {len(answers[0])}**" in text
    assert f"from **{recount[2]}** to **{recount[3]} of {len(answers[0])}**" in text
    blocked = sum(any(t in a.casefold() for t in targets(setup.phrase)) for column in answers for a in column)
    assert f"would have stopped **{blocked}** of them" in text


def test_bad_setup_gets_a_clear_message_and_the_rest_of_the_page_runs(run_page):
    app = run_page("agent", timeout=600, prompt="What's the capital of India?", **SETTINGS)
    app.text_input(key="inj_phrase").set_value("x" * 41).run()
    assert not app.exception
    assert "phrase has 41 characters; at most 40" in app.error[0].value
    assert plotly_figure(app, "agent_roads") is not None
    app.text_input(key="inj_phrase").set_value("Delhi")
    app.text_input(key="inj_question").set_value("  ").run()
    assert "question is empty" in app.error[0].value
