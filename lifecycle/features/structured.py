"""One structured-output or tool call followed from the prompt to the validated object.

``follow_call`` renders the prompt (tool definitions cost their tokens in the system turn; a
json_schema is enforced by the grammar alone and costs no prompt token here), generates under
the grammar, and records for every step how many tokens of the vocabulary the mask let through,
whether the model's own favourite was among them, and the chunk deltas a stream sends for it
(tool calls as OpenAI streams them: id and name first, then argument fragments). At the end the
answer is parsed and validated against its schema with jsonschema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lifecycle.stages.context_window import TOOLS, RenderedPrompt, render_messages
from lifecycle.stages.generation import generate_steps
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.tokenization import encode_plain
from lifecycle.features.tools import OutputRules, ToolCallStream, read_output


@dataclass
class StructuredStep:
    index: int
    token: str
    allowed: int
    probability: float
    model_choice: str
    model_choice_allowed: bool
    deltas: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class StreamRow:
    """One chunk delta a stream sends, with the step (1-based) and token that sent it, and what a client has glued
    together once it arrived."""

    step: int
    token: str
    delta: dict
    so_far: str


@dataclass
class StructuredRun:
    prompt: RenderedPrompt
    vocabulary: int
    tool_tokens: int
    schema_tokens: int
    steps: list[StructuredStep]
    text: str
    finish_reason: str
    content: str | None
    tool_calls: list[dict]
    value: object = None
    schema: dict | None = None
    problem: str | None = None

    @property
    def valid(self) -> bool:
        return self.problem is None


def follow_call(loaded, messages: list[dict], rules: OutputRules, settings: SamplingSettings,
                max_tokens: int) -> StructuredRun:
    """Run ``messages`` under ``rules`` on the real model and record every step (see module doc)."""
    prompt = render_messages(messages, rules.definitions())
    reader = ToolCallStream() if rules.may_call else None
    steps, text, finish_reason = [], "", "cancelled"
    for step in generate_steps(loaded, prompt.ids, settings, max_tokens, constraint=rules.constraint(loaded)):
        favourite = step.top_logprobs[0].token_id if step.top_logprobs else step.token_id
        deltas = reader.feed(step.delta) if reader else ([{"content": step.delta}] if step.delta else [])
        text += step.delta
        finish_reason = step.finished or finish_reason
        steps.append(StructuredStep(
            step.index, step.text, step.grammar_allowed or loaded.vocab_size, step.probability,
            _token_text(loaded, favourite), favourite == step.token_id or _survived_the_mask(step, favourite),
            deltas,
        ))
    # The final message names the call by the id its stream's first delta carried: one call, one id.
    content, calls = read_output(text, reader.call_id) if rules.may_call else (text, [])
    if calls and finish_reason == "stop":
        finish_reason = "tool_calls"
    run = StructuredRun(
        prompt, loaded.vocab_size, sum(s.tokens for s in prompt.segments if s.name == TOOLS),
        len(encode_plain(json.dumps(rules.response_format.schema))) if rules.response_format.schema else 0,
        steps, text, finish_reason, content, [call.wire() for call in calls],
    )
    _validate(run, rules, calls)
    return run


def stream_rows(steps: list[StructuredStep]) -> list[StreamRow]:
    """Every chunk delta in order. What a client holds after each: the tool call's arguments glued from their
    fragments when the stream carries a call (nothing yet after its first delta, which brings the id and name),
    else the content."""
    calls = any("tool_calls" in delta for step in steps for delta in step.deltas)
    rows, so_far = [], ""
    for step in steps:
        for delta in step.deltas:
            if calls:
                so_far += "".join((call.get("function") or {}).get("arguments") or ""
                                  for call in delta.get("tool_calls") or [])
            else:
                so_far += delta.get("content") or ""
            rows.append(StreamRow(step.index + 1, step.token, delta, so_far))
    return rows


def _token_text(loaded, token_id: int) -> str:
    from lifecycle.stages.vocabulary import token_bytes, token_display

    return token_display(token_bytes(loaded).of(token_id))


def _survived_the_mask(step, token_id: int) -> bool:
    """Whether the model's favourite survived the mask (it has a final probability above zero)."""
    return any(alt.id == token_id and alt.probability > 0 for alt in step.alternatives)


def _validate(run: StructuredRun, rules: OutputRules, calls) -> None:
    import jsonschema

    if calls:
        tool = next(t for t in rules.tools if t.name == calls[0].name)
        source, run.schema = calls[0].arguments, tool.parameters
    elif rules.response_format.constrained:
        source, run.schema = run.text, rules.response_format.json_schema()
    else:
        run.problem = "the answer is free text: there is nothing to validate"
        return
    try:
        run.value = json.loads(source)
        jsonschema.validate(run.value, run.schema)
    except (ValueError, jsonschema.ValidationError) as error:
        run.problem = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
