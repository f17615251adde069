"""The agent loop: an ordinary program calling a stateless model in a loop, around a messages array.

Each round sends the whole messages array. When the answer is a tool call, the program runs the
tool here (a local, safe function: no network, no ``eval``), appends the assistant message with
its ``tool_calls`` and a ``tool`` message with the result, and calls again; when the answer is
text, the loop ends. An unknown tool, arguments the tool rejects, or a tool that fails go back to
the model as the tool's result (an ``{"error": ...}`` object), as an API client would send them.
A round limit ends a loop that never answers.

The model is reached through a ``Send`` function: ``engine_send`` takes the path the API takes
(the same prompt rendering, grammar and engine), and a client of the API can pass its own (the
tests drive this loop through the official openai SDK). Every round records the messages array
it sent, the prompt tokens re-sent and how many of them the prefix cache served.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from lifecycle.stages.context_window import render_messages
from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import Generation, generate_steps
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.features.tools import output_rules, read_output

MAX_ROUNDS = 8
MAX_EXPRESSION = 80
GREEDY = SamplingSettings(temperature=0.0)


class ToolRejected(ValueError):
    """The tool refuses its arguments; the message goes back to the model as the tool's result."""


# --- the local tools ----------------------------------------------------------------------------

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
              ast.USub: operator.neg, ast.UAdd: operator.pos}
MAX_EXPONENT = 100
MAX_MAGNITUDE = 10**18  # every intermediate result stays below this (a JSON answer, not a million digits)


def calculate(expression: str) -> dict:
    """Arithmetic on numbers (+ - * / // % ** and parentheses), parsed with ``ast``: anything else
    (names, calls, attributes) is rejected, nothing is ever evaluated as Python."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ToolRejected(f"not an arithmetic expression: {expression[:MAX_EXPRESSION]!r}") from None
    try:
        result = _arithmetic(tree.body)
    except ZeroDivisionError:
        raise ToolRejected("division by zero") from None
    if not isinstance(result, (int, float)) or not math.isfinite(result):
        raise ToolRejected(f"the result is not a finite real number: {str(result)[:40]}")
    return {"expression": expression, "result": result}


def _arithmetic(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolRejected(f"exponent above {MAX_EXPONENT}")
        result = _OPERATORS[type(node.op)](left, right)
        if isinstance(result, (int, float)) and abs(result) > MAX_MAGNITUDE:
            raise ToolRejected(f"a result beyond ±{MAX_MAGNITUDE:.0e}")
        return result
    raise ToolRejected(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")


# Every unit as a factor to its quantity's base unit (metre, kilogram); temperatures convert apart.
LENGTHS = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "inch": 0.0254, "foot": 0.3048, "mile": 1609.344}
MASSES = {"g": 0.001, "kg": 1.0, "pound": 0.45359237, "ounce": 0.028349523125}
TEMPERATURES = ("celsius", "fahrenheit", "kelvin")


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """``value`` in ``from_unit`` expressed in ``to_unit`` (length, mass or temperature)."""
    if from_unit in TEMPERATURES and to_unit in TEMPERATURES:
        result = _from_celsius(_to_celsius(value, from_unit), to_unit)
    else:
        table = next((t for t in (LENGTHS, MASSES) if from_unit in t and to_unit in t), None)
        if table is None:
            raise ToolRejected(f"cannot convert {from_unit} to {to_unit}: not the same kind of quantity")
        result = value * table[from_unit] / table[to_unit]
    return {"value": value, "from_unit": from_unit, "to_unit": to_unit, "result": round(result, 6)}


def _to_celsius(value: float, unit: str) -> float:
    return {"celsius": value, "fahrenheit": (value - 32) * 5 / 9, "kelvin": value - 273.15}[unit]


def _from_celsius(value: float, unit: str) -> float:
    return {"celsius": value, "fahrenheit": value * 9 / 5 + 32, "kelvin": value + 273.15}[unit]


def current_time() -> dict:
    """The server's clock, in UTC."""
    return {"utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}


@dataclass(frozen=True)
class LocalTool:
    """A function the loop may run: its OpenAI definition and the Python that answers it."""

    definition: dict
    run: Callable[..., dict]

    @property
    def name(self) -> str:
        return self.definition["function"]["name"]


def _function(name: str, description: str, properties: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}}}


UNITS = [*LENGTHS, *MASSES, *TEMPERATURES]
LOCAL_TOOLS = (
    LocalTool(_function("calculate", "Evaluate an arithmetic expression, for example 17 * 23.", {
        "expression": {"type": "string", "pattern": r"^[0-9(-][0-9+\-*/%(). ]*$", "maxLength": MAX_EXPRESSION}}), calculate),
    LocalTool(_function("convert_units", "Convert a length, mass or temperature from one unit to another.", {
        "value": {"type": "number"}, "from_unit": {"enum": UNITS}, "to_unit": {"enum": UNITS}}), convert_units),
    LocalTool(_function("current_time", "The current date and time (UTC).", {}), current_time),
)


def run_tool(tools: Sequence[LocalTool], name: str, arguments: str) -> dict:
    """The result of one call, as the ``tool`` message will carry it: the tool's answer, or an
    ``error`` for an unknown tool, arguments that are not the declared JSON, or a rejection."""
    import jsonschema

    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return {"error": f"unknown tool {name[:64]!r}; the tools are {', '.join(t.name for t in tools)}"}
    try:
        values = json.loads(arguments)
        jsonschema.validate(values, tool.definition["function"]["parameters"])
        return tool.run(**values)
    except ValueError as error:  # bad JSON, a rejection
        return {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    except jsonschema.ValidationError as error:
        return {"error": f"invalid arguments: {error.message[:200]}"}
    except Exception as error:  # a tool that fails is still an answer the model can read
        return {"error": f"the tool failed: {type(error).__name__}"}


# --- one call of the model ----------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One answer of the model, as an API client sees it."""

    content: str | None
    tool_calls: list[dict]
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


Send = Callable[[list[dict], list[dict], object], Reply]  # (messages, tool definitions, tool_choice)


def engine_send(loaded, max_tokens: int = 64, settings: SamplingSettings = GREEDY) -> Send:
    """A ``Send`` taking the API's own path: the request's output rules and grammar, the prompt
    rendered from the messages, generation in the shared engine (its prefix cache counted)."""

    def send(messages: list[dict], definitions: list[dict], tool_choice: object) -> Reply:
        rules = output_rules(None, definitions, tool_choice)
        ids = render_messages(messages, rules.definitions()).ids
        timings: dict = {}
        steps = list(generate_steps(loaded, ids, settings, max_tokens, timings=timings,
                                    constraint=rules.constraint(loaded)))
        answer = Generation.collect(ids, steps, timings.get("prefill_seconds", 0.0))
        content, calls = read_output(answer.text) if rules.may_call else (answer.text, [])
        finish = "tool_calls" if calls and answer.finish_reason == "stop" else answer.finish_reason
        return Reply(content, [call.wire() for call in calls], finish, len(ids),
                     int(timings.get("cached_tokens", 0)), answer.completion_tokens)

    return send


# --- the loop -----------------------------------------------------------------------------------


@dataclass
class Round:
    """One call of the loop: the messages it sent, what came back, and what the tools answered."""

    index: int
    messages: list[dict]
    tool_choice: object
    reply: Reply
    tool_results: list[dict] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return self.reply.prompt_tokens

    @property
    def cached_tokens(self) -> int:
        return self.reply.cached_tokens


@dataclass
class AgentRun:
    """The whole loop. ``outcome``: "answered" (a text answer), "round_limit" (still calling tools
    when the rounds ran out) or "cut_off" (an answer ended by max_tokens)."""

    rounds: list[Round]
    messages: list[dict]
    outcome: str
    answer: str | None


def run_agent(start: Sequence[dict], send: Send, tools: Sequence[LocalTool] = LOCAL_TOOLS, max_rounds: int = 4,
              first_choice: object = "required", then_choice: object = "auto") -> AgentRun:
    """Send the messages ``start`` (ending with the user's question) and loop: call, run the tool,
    append the call and its result, call again, until a text answer or ``max_rounds`` calls.

    ``first_choice`` is the first round's tool_choice ("required": the loop starts with a call),
    ``then_choice`` every later round's ("auto": the model may answer or call again).
    """
    last = start[-1] if isinstance(start, (list, tuple)) and start else None
    if not isinstance(last, dict) or last.get("role") != "user" or not str(last.get("content") or "").strip():
        raise LifecycleError("The loop starts from messages ending with a non-empty user message.", param="messages")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or not 1 <= max_rounds <= MAX_ROUNDS:
        raise LifecycleError(f"The round limit must be a whole number from 1 to {MAX_ROUNDS}.", param="max_rounds")
    definitions = [tool.definition for tool in tools]
    messages = [dict(message) for message in start]
    rounds: list[Round] = []
    for index in range(1, max_rounds + 1):
        choice = first_choice if index == 1 else then_choice
        reply = send([dict(m) for m in messages], definitions, choice)
        current = Round(index, [dict(m) for m in messages], choice, reply)
        rounds.append(current)
        if not reply.tool_calls:
            outcome = "cut_off" if reply.finish_reason == "length" else "answered"
            messages.append({"role": "assistant", "content": reply.content or ""})
            return AgentRun(rounds, messages, outcome, reply.content)
        messages.append({"role": "assistant", "content": None, "tool_calls": reply.tool_calls})
        for call in reply.tool_calls:
            result = run_tool(tools, call["function"]["name"], call["function"]["arguments"])
            current.tool_results.append(result)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    return AgentRun(rounds, messages, "round_limit", None)
