"""Tools (function calling): definitions in the prompt, the call format the model must follow,
and the calls read back out of the generated text, whole or as streamed fragments.

SmolLM2's chat template has no tool format, so this server uses the Hermes-style one its larger
relatives were trained on: the system turn gets a ``# Tools`` section (an instruction and one JSON
object per function), and a call is the model's whole answer::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

``tool_choice`` picks the grammar that enforces this at sampling time (lifecycle.features.grammar):
"required" or a named function allow nothing but a call (to any tool / to that one), "auto" allows
a call or plain text that does not start with "<", "none" leaves the answer free. One call per
answer. An assistant message with ``tool_calls`` and a ``tool`` result message are rendered back
into the same text, so a conversation can carry a call and its result to the next turn.
"""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass, field

from lifecycle.errors import LifecycleError
from lifecycle.features.grammar import (
    JSON_OPTIONS,
    NAME_PATTERN,
    SCHEMA_MAPS,
    ResponseFormat,
    check_schema,
    check_strict,
    json_grammar,
    lark_grammar,
    one_line,
    parse_response_format,
    safe_integers,
    validate_grammar,
)

CALL_OPEN, CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
NO_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}
MAX_TOOLS = 128
INSTRUCTION = (
    "You can call these functions. To call one, answer with only\n"
    f'{CALL_OPEN}{{"name": <function name>, "arguments": <arguments as a JSON object>}}{CALL_CLOSE}\n'
)
_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    parameters: dict = field(default_factory=lambda: dict(NO_PARAMETERS))
    strict: bool = False

    def definition(self) -> dict:
        """The function as the prompt shows it (OpenAI's ``function`` object)."""
        spec = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {key: value for key, value in spec.items() if value != ""}


@dataclass(frozen=True)
class ToolChoice:
    """"none", "auto", "required", or "function" with the one ``name`` that must be called."""

    mode: str
    name: str | None = None


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str

    def wire(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id() -> str:
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


# --- request side -----------------------------------------------------------------------------


def parse_tools(value: object) -> list[Tool]:
    """Validate a request's ``tools`` (absent/null = none); every schema is checked before any model work."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise LifecycleError("Invalid 'tools': expected an array of tools.", "tools", "invalid_type")
    if len(value) > MAX_TOOLS:
        raise LifecycleError(f"Invalid 'tools': at most {MAX_TOOLS} tools, got {len(value)}.", "tools", "array_above_max_length")
    tools = [_tool(item, f"tools[{index}]") for index, item in enumerate(value)]
    names = [tool.name for tool in tools]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate:
        raise LifecycleError(f"Invalid 'tools': the function name {duplicate!r} appears twice.", "tools", "invalid_value")
    return tools


def _tool(item: object, where: str) -> Tool:
    if not isinstance(item, dict) or item.get("type") != "function" or not isinstance(item.get("function"), dict):
        raise LifecycleError(
            f"Invalid '{where}': expected {{\"type\": \"function\", \"function\": {{...}}}}.", where, "invalid_value"
        )
    spec = item["function"]
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise LifecycleError(
            f"Invalid '{where}.function.name': expected 1-64 letters, digits, underscores or dashes.",
            f"{where}.function.name",
            "invalid_value",
        )
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise LifecycleError(f"Invalid '{where}.function.description': expected a string.", f"{where}.function.description", "invalid_type")
    parameters = spec.get("parameters", NO_PARAMETERS)
    check_schema(parameters, f"{where}.function.parameters")
    if parameters.get("type", "object") != "object":
        raise LifecycleError(
            f"Invalid '{where}.function.parameters': the arguments must be a JSON object (type 'object').",
            f"{where}.function.parameters",
            "invalid_schema",
        )
    strict = spec.get("strict", False)
    if strict:
        check_strict(parameters, f"{where}.function.parameters", f"function '{name}'")
    return Tool(name, description, parameters, bool(strict))


def parse_tool_choice(value: object, tools: list[Tool]) -> ToolChoice:
    """Validate ``tool_choice`` against the tools; OpenAI's default is "auto" with tools, "none" without."""
    if value is None:
        return ToolChoice("auto" if tools else "none")
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise LifecycleError(
                f"Invalid 'tool_choice': {json.dumps(value)[:80]}. Supported values are: 'none', 'auto', 'required', "
                "or {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                "tool_choice",
                "invalid_value",
            )
        choice = ToolChoice(value)
    elif isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("function"), dict):
        name = value["function"].get("name")
        if not isinstance(name, str):
            raise LifecycleError("Invalid 'tool_choice.function.name': expected a string.", "tool_choice.function.name", "invalid_type")
        choice = ToolChoice("function", name)
    else:
        raise LifecycleError("Invalid 'tool_choice': expected a string or a function choice object.", "tool_choice", "invalid_type")
    if choice.mode != "none" and not tools:
        raise LifecycleError(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            "tool_choice",
            "invalid_value",
        )
    if choice.mode == "function" and choice.name not in {tool.name for tool in tools}:
        raise LifecycleError(
            f"Invalid 'tool_choice': no function named {choice.name[:64]!r} in 'tools'.", "tool_choice", "invalid_value"
        )
    return choice


def tools_prompt(definitions: list[dict]) -> str:
    """The text appended to the system turn for these tool definitions."""
    lines = "\n".join(json.dumps(spec, ensure_ascii=False, sort_keys=True) for spec in definitions)
    return f"\n\n# Tools\n{INSTRUCTION}\n{lines}"


def call_text(name: str, arguments: str) -> str:
    """A call exactly as the model writes it (and as history carries it back)."""
    return f'{CALL_OPEN}{{"name": {json.dumps(name)}, "arguments": {arguments}}}{CALL_CLOSE}'


def assistant_text(message: dict) -> str:
    """An assistant message's content for the template: its text, then its tool calls."""
    parts = [message["content"]] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(call_text(str(function.get("name", "")), str(function.get("arguments", "{}"))))
    return "\n".join(parts)


# --- the grammar ------------------------------------------------------------------------------


def call_schema(tools: list[Tool]) -> dict:
    """The JSON a call must be: {"name": one of the tools, "arguments": that tool's parameters,
    held to the declared properties (closed_objects)}."""
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": closed_objects(tool.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return {**safe_integers(schema), "x-guidance": JSON_OPTIONS}


# Keywords never a schema (SCHEMA_MAPS: those whose value maps names to schemas).
_NOT_SCHEMAS = ("enum", "const", "default", "examples", "required")


def closed_objects(node: object) -> object:
    """A copy of an argument schema where every object that does not say otherwise allows only its
    declared properties (``additionalProperties: false``; its ``required`` list stays as given).

    JSON Schema's default admits any extra key, and a small model forced into a call uses that
    freedom: it copies the schema it was shown ("type", "required", "properties", ...) into the
    arguments until max_tokens runs out. An explicit ``additionalProperties`` is kept.
    """
    if isinstance(node, list):
        return [closed_objects(item) for item in node]
    if not isinstance(node, dict):
        return node
    copy = {}
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            copy[key] = {name: closed_objects(sub) for name, sub in value.items()}
        elif key in _NOT_SCHEMAS:
            copy[key] = value
        else:
            copy[key] = closed_objects(value)
    is_object = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]) \
        or "properties" in node
    if is_object and "additionalProperties" not in node and "patternProperties" not in node:
        copy["additionalProperties"] = False
    return copy


def output_grammar(tools: list[Tool] | tuple[Tool, ...], choice: ToolChoice, response_format: ResponseFormat) -> str | None:
    """The llguidance grammar for the whole answer, or None when it is unconstrained."""
    if choice.mode == "none" or not tools:
        return _json_only(response_format)
    callable_tools = [tool for tool in tools if choice.mode != "function" or tool.name == choice.name]
    call = f"call: {json.dumps(CALL_OPEN)} body {json.dumps(CALL_CLOSE)}\nbody: %json {json.dumps(call_schema(callable_tools))}\n"
    if choice.mode in ("required", "function"):
        lark = "start: call\n" + call
    elif response_format.constrained:
        schema = {**safe_integers(response_format.json_schema()), "x-guidance": JSON_OPTIONS}
        lark = f"start: call | answer\n{call}answer: %json {json.dumps(schema)}\n"
    else:
        lark = "start: call | TEXT\n" + call + "TEXT: /[^<](.|\\n)*/\n"
    grammar = lark_grammar(lark)
    problem = validate_grammar(grammar)
    if problem:
        raise LifecycleError(f"Invalid 'tools': {one_line(problem)}", "tools", "invalid_schema")
    return grammar


def _json_only(response_format: ResponseFormat) -> str | None:
    return json_grammar(response_format.json_schema()) if response_format.constrained else None


# --- response side ----------------------------------------------------------------------------


def read_output(text: str, call_id: str | None = None) -> tuple[str | None, list[ToolCall]]:
    """The answer's (content, tool_calls): a call is parsed out; any other text is content.

    ``call_id`` is the id a stream of the same answer already sent (a new one when None)."""
    if not text.startswith("<"):
        return text, []
    stream = ToolCallStream(call_id)
    stream.feed(text)
    return (None, [stream.call]) if stream.call else (text, [])


class ToolCallStream:
    """Reads the answer as it streams and turns it into OpenAI's deltas: plain ``content`` text, or
    one tool call whose first delta carries id, type, name and empty arguments, followed by the
    arguments in fragments as the model writes them (no fragment after the arguments' closing brace).
    """

    def __init__(self, call_id: str | None = None):
        self.call_id = call_id or new_call_id()
        self.buffer = ""
        self.mode: str | None = None  # "content" or "call", decided by the first character
        self.call: ToolCall | None = None
        self._args_start: int | None = None
        self._args_end: int | None = None
        self._sent = 0

    def feed(self, text: str) -> list[dict]:
        """Deltas for this piece of text (each one a chunk's ``delta``)."""
        if not text:
            return []
        if self.mode is None:
            self.mode = "call" if text.startswith("<") else "content"
        if self.mode == "content":
            return [{"content": text}]
        self.buffer += text
        deltas = []
        if self.call is None and self._start():
            deltas.append({"tool_calls": [{"index": 0, "id": self.call.id, "type": "function",
                                           "function": {"name": self.call.name, "arguments": ""}}]})
        if self.call is not None:
            fragment = self._new_arguments()
            if fragment:
                self.call.arguments += fragment
                deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})
        return deltas

    def _start(self) -> bool:
        head = self.buffer
        prefix = CALL_OPEN + '{"name": "'
        marker = '", "arguments": '
        if not head.startswith(prefix) or marker not in head[len(prefix):]:
            return False
        name_end = head.index(marker, len(prefix))
        self.call = ToolCall(self.call_id, json.loads(head[len(prefix) - 1 : name_end + 1]), "")
        self._args_start = self._sent = name_end + len(marker)
        return True

    def _new_arguments(self) -> str:
        end = self._args_end if self._args_end is not None else _value_end(self.buffer, self._args_start)
        if end is not None:
            self._args_end = end
        stop = end if end is not None else len(self.buffer)
        fragment, self._sent = self.buffer[self._sent : stop], max(self._sent, stop)
        return fragment


def _value_end(text: str, start: int) -> int | None:
    """The index just past the JSON object or array starting at ``start``, or None if unfinished."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


# --- one request's output rules ---------------------------------------------------------------


@dataclass(frozen=True)
class OutputRules:
    """What a request's answer must look like: its response_format, the tools it may call and how
    (tool_choice), compiled once into the grammar every generation of the request follows."""

    response_format: ResponseFormat = field(default_factory=lambda: ResponseFormat("text"))
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice = field(default_factory=lambda: ToolChoice("none"))
    grammar: str | None = None

    @property
    def may_call(self) -> bool:
        return bool(self.tools) and self.tool_choice.mode != "none"

    def definitions(self) -> list[dict]:
        return [tool.definition() for tool in self.tools]

    def constraint(self, loaded):
        """A fresh grammar constraint for one generation (None when the answer is free text)."""
        from lifecycle.features.grammar import GrammarConstraint

        return GrammarConstraint(loaded, self.grammar) if self.grammar is not None else None


def output_rules(response_format: object = None, tools: object = None, tool_choice: object = None) -> OutputRules:
    """Validate a request's response_format, tools and tool_choice together (LifecycleError naming
    the parameter, before any model work) and compile their grammar."""
    form = parse_response_format(response_format)
    parsed = parse_tools(tools)
    choice = parse_tool_choice(tool_choice, parsed)
    return OutputRules(form, tuple(parsed), choice, output_grammar(parsed, choice, form))
