"""Every number the Agents page states, for two prompts, against an independent recomputation.

The page runs under AppTest at temperature 0. This file recomputes without lifecycle.features.agent, lifecycle.features.injection,
lifecycle.features.determinism or lifecycle.lessons.agent: the loop's counts by counting its own table and the messages it
shows, a ``calculate`` result with Python's arithmetic; each case's prompt with the tokenizer's own
``apply_chat_template`` and the first-token probability with transformers' own forward pass, over the tokens
(found here through GPT-2's byte table) whose text starts a forbidden phrase; the answers that say it and the
guardrail's stops by searching the sampled answers the page lists; the alone road's answer, its narrowest top-two
gap (a difference of log-probabilities is a difference of logits) and the first logit summed in fp32 both ways
with transformers' own final hidden state and head. Each sentence must take the turn its numbers call for.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from tests.pages.harness import markdowns, plotly_figure, run_page
from tests.pages.recompute import BYTE_OF, next_token_probs, template_ids, transformers_greedy
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "What is 17 times 23?"]
ROAD_TOKENS = 12  # the caption's "over the answer's 12 tokens", checked against the caption below
CASES = ("no rule", "rule in the system prompt", "document", "rule hidden in the document")
LEAD_IN = "The capital of India is"  # the setup form's default answer start, read back from the form below


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "arithmetic"])
def agent(request):
    app = run_page("agent", timeout=900, prompt=request.param, temperature=0)
    assert not app.exception and not app.error
    return request.param, app


def _markdown(app, start: str) -> str:
    return next(m for m in markdowns(app) if start in m).replace("\\", "")


def _caption(app, start: str) -> str:
    return next(c.value for c in app.caption if c.value.startswith(start)).replace("\\", "")


def _frame(app, column: str):
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def test_the_loops_sentence_counts_its_own_rounds(agent):
    _, app = agent
    table, lesson = _frame(app, "tool result"), _markdown(app, "The loop made")
    calls = [c for cell in table["tool call"] for c in cell.split("; ") if c]
    results = [r for cell in table["tool result"] for r in cell.split("; ") if r]
    errors = sum("error" in json.loads(r) for r in results)
    last = table.iloc[-1]
    outcome = ("reached its round limit still calling tools" if last["tool call"] else
               "ended when max_tokens cut the answer off" if last["finish_reason"] == "length" else
               "ended with a text answer")
    assert f"made **{_plural(len(table), 'call')}** of the model and {outcome}" in lesson
    assert f"ran **{_plural(len(calls), 'tool call')}** here ({errors} answered with an error)" in lesson
    assert len(results) == len(calls)
    assert "the first round must call one (tool_choice required)" in lesson and table["tool call"].iloc[0]
    assert table["finish_reason"].iloc[0] == "tool_calls"
    for call, result in zip(calls, map(json.loads, results)):
        name, arguments = re.fullmatch(r"(\w+)\((.*)\)", call).groups()
        if name == "calculate" and "error" not in result:
            expression = json.loads(arguments)["expression"]
            assert re.fullmatch(r"[0-9+\-*/%(). ]+", expression)
            assert result["result"] == pytest.approx(eval(expression, {"__builtins__": {}}))  # digits and operators
    # Stateless: each round sends the last round's messages, the assistant's reply and one message per tool result.
    sent = list(table["messages sent"])
    assert sent[0] == 1
    for before, after, cell in zip(sent, sent[1:], table["tool result"]):
        assert after == before + 1 + len([r for r in cell.split("; ") if r])
    prompt_tokens, cached = list(table["prompt tokens"]), list(table["cached tokens"])
    if len(table) > 1:
        assert (f"Round {len(table)} re-sent **{prompt_tokens[-1]:,} prompt tokens** for round 1's "
                f"**{prompt_tokens[0]:,}**, **{cached[-1]:,}** of them served by the prefix cache") in lesson
        assert all(after > before for before, after in zip(prompt_tokens, prompt_tokens[1:]))
    else:
        assert "re-sent" not in lesson
    assert all(0 <= c <= p for c, p in zip(cached, prompt_tokens))
    assert _caption(app, "After the loop:") == f"After the loop: {sent[-1] + 1 + (len(results) if last['tool call'] else 0)} messages"


def _case_arrays(app) -> dict[str, list[dict]]:
    """The messages array each case sent: the page's last four JSON blocks, each after its case's caption."""
    captions = [c.value for c in app.caption]
    assert all(f"{case}: the messages sent" in captions for case in CASES)
    arrays = [json.loads(j.value) if isinstance(j.value, str) else j.value for j in app.json]
    return dict(zip(CASES, arrays[-len(CASES):]))


def _leaking_ids(loaded, phrases: list[str]) -> np.ndarray:
    """Tokens whose text (leading spaces dropped, case folded) starts one of ``phrases`` or begins with one."""
    tokenizer = reference_tokenizer(loaded)
    special = set(tokenizer.all_special_ids)
    found = []
    for token_id, token in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))):
        if token_id in special or token is None:
            continue
        text = bytes(BYTE_OF[c] for c in token if c in BYTE_OF).decode("utf-8", "ignore").lstrip().casefold()
        if text and any(p.startswith(text) or text.startswith(p) for p in phrases):
            found.append(token_id)
    return np.array(found)


def _moved(before: float, after: float) -> str:
    if round(100 * after) == round(100 * before):
        return f"stayed at **{100 * after:.0f}%**"
    return f"{'fell' if after < before else 'rose'} from **{100 * before:.0f}%** to **{100 * after:.0f}%**"


def test_the_tendency_is_measured_and_said_as_it_came_out(agent, loaded):
    _, app = agent  # the section does not use the sidebar's prompt: it must hold, the same, for each
    assert app.text_input(key="inj_lead_in").value == LEAD_IN
    said = re.findall(r"“(.*?)”", _caption(app, "Blue:"))
    messages = _case_arrays(app)
    cases = _frame(app, "likeliest such tokens").set_index("case")
    lead = reference_tokenizer(loaded).encode(LEAD_IN, add_special_tokens=False)
    leaking = _leaking_ids(loaded, said)
    mass = {}
    for case in CASES:
        ids = template_ids_of(loaded, messages[case])
        assert cases.loc[case, "prompt tokens"] == len(ids)
        mass[case] = float(next_token_probs(loaded, ids + lead)[leaking].sum())
        assert float(cases.loc[case, "first token"].removesuffix("%")) / 100 == pytest.approx(mass[case], abs=6e-4)
    answers = [frame.value["answer"] for frame in app.dataframe if list(frame.value.columns) == ["seed", "answer"]]
    leaks = {case: sum(any(p in a.casefold() for p in said) for a in column) for case, column in zip(CASES, answers)}
    draws = len(answers[0])
    for case in CASES:
        assert cases.loc[case, "answers saying it"] == f"{leaks[case]} of {draws}"
    tendency = _markdown(app, "The rule in the system prompt")
    without, with_rule = leaks["no rule"], leaks["rule in the system prompt"]
    turn = "lowered" if with_rule < without else "did not change" if with_rule == without else "*raised*"
    assert turn in tendency
    assert _moved(mass["no rule"], mass["rule in the system prompt"]) in tendency
    hidden = _markdown(app, "Hidden in the retrieved document")
    plain, injected = leaks["document"], leaks["rule hidden in the document"]
    moved = _moved(mass["document"], mass["rule hidden in the document"])
    assert moved in hidden
    if plain == injected and moved.startswith("stayed"):
        assert "changed nothing measurable" in hidden and "read like any other instruction" not in hidden
    elif plain == injected:
        assert f"did not change how many answers say the phrase (**{injected} of {draws}**)" in hidden
    else:
        assert f"from **{plain}** to **{injected} of {draws}**" in hidden
    guard = _markdown(app, "A rule that must hold")
    stopped = sum(any(p in a.casefold() for p in said) for column in answers for a in column)
    assert (f"run over all **{sum(map(len, answers))}** sampled answers above would have stopped **{stopped}** of "
            f"them (the {injected} of the injected case among them)") in guard
    assert ", ".join(json.dumps(p) for p in said) in guard


def template_ids_of(loaded, messages: list[dict]) -> list[int]:
    ids = reference_tokenizer(loaded).apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_the_roads_are_measured_against_the_models_own_answer(agent, loaded):
    prompt, app = agent
    ids = template_ids(loaded, prompt)
    caption = _caption(app, "Each bar:")
    steps = int(re.search(r"over the answer's (\d+) tokens", caption).group(1))
    assert steps == ROAD_TOKENS
    answer, rows = list(ids), []
    with loaded.lock, torch.inference_mode():  # greedy for exactly ``steps`` tokens, an end-of-sequence one included
        for _ in range(steps):
            rows.append(loaded.model(input_ids=torch.tensor([answer])).logits[0, -1].double())
            answer.append(int(rows[-1].argmax()))
    answer = answer[len(ids):]
    top = torch.topk(torch.stack(rows), 2, dim=-1).values
    margins = (top[:, 0] - top[:, 1]).numpy()
    shown = [t.value for t in app.text]
    assert reference_tokenizer(loaded).decode(answer).rstrip("\n") == shown[-1]  # st.text drops a trailing newline
    roads = _frame(app, "greedy pick changed at")
    largest = [float(v) for v in roads["largest difference"]]
    sentence = _markdown(app, "The same prompt at temperature 0") if max(largest) else \
        _markdown(app, "Every road gave")
    flips = [(r, c) for r, c in zip(roads["road"], roads["greedy pick changed at"]) if c != "no step"]
    if not max(largest):
        assert "bit for bit" in sentence
    elif flips:
        assert "enough to change the greedy pick" in sentence and all(r in sentence for r, _ in flips)
    else:
        gap, step, ratio = re.search(r"was \*\*([\d.e-]+)\*\* \(step (\d+)\), \*\*([\d,]+)×\*\*", sentence).groups()
        assert float(gap) == pytest.approx(margins.min(), rel=5e-3, abs=1e-4)
        assert margins[int(step) - 1] == pytest.approx(margins.min(), abs=1e-3)
        assert int(ratio.replace(",", "")) == pytest.approx(float(gap) / max(largest), rel=0.02)
        # The greedy pick cannot have changed: no road moved the logits half the narrowest gap.
        assert max(largest) < margins.min() / 2
    figure = plotly_figure(app, "agent_roads")
    assert figure.layout.shapes[0].y0 == pytest.approx(margins.min() / 2, rel=5e-3, abs=1e-4)


def test_one_logit_summed_two_ways_is_the_models_own(agent, loaded):
    prompt, app = agent
    ids = template_ids(loaded, prompt)
    first = transformers_greedy(loaded, ids, 1)[0][0]
    with loaded.lock, torch.inference_mode():
        hidden = loaded.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].float()
        products = (hidden * loaded.model.lm_head.weight[first].float()).numpy()
    forward = float(np.cumsum(products, dtype=np.float32)[-1])
    backward = float(np.cumsum(products[::-1], dtype=np.float32)[-1])
    exact = float(np.sum(products.astype(np.float64)))
    text = next(m for m in markdowns(app) if "first token's logit" in m)
    numbers = [float(n) for n in re.findall(r"-?\d+\.\d{7}", text)]
    for stated, recomputed in zip(numbers, [forward, backward, exact] if len(numbers) == 3 else [forward, exact]):
        assert stated == pytest.approx(recomputed, abs=2e-3)
    if len(numbers) == 3:
        assert f"a sum of {products.size:,} products" in text and numbers[0] != numbers[1]
    else:
        assert "comes out the same here" in text
