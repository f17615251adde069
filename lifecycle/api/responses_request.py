"""The Responses API request (``POST /v1/responses``), checked and translated to the chat form.

A Responses call says the same thing as a chat-completions call in other words: ``input`` (a
string or a list of message items) instead of ``messages``, ``instructions`` instead of a system
message, ``max_output_tokens`` instead of ``max_tokens``, ``text.format`` instead of
``response_format``, flat function ``tools`` (not nested under ``function``), ``function_call`` /
``function_call_output`` input items instead of an assistant's ``tool_calls`` and ``tool``
messages, and ``previous_response_id`` to continue a conversation the server stored, instead of
sending it again. ``to_chat`` turns one into the other so both run the same stages.
Fields this server cannot honour are refused with 400 naming them, as for chat completions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lifecycle.errors import LifecycleError
from lifecycle.lessons.words import counted
from lifecycle.model import model_name
from lifecycle.stages import json_fields as f
from lifecycle.stages.request import (
    EXTENSIONS,
    GUARDRAIL,
    MAX_TOP_LOGPROBS,
    ChatRequest,
    model_field,
    sampling_number,
    validate_request,
)

LOGPROBS_INCLUDE = "message.output_text.logprobs"
REFUSED = {
    "background": "every response is generated while the client waits",
    "conversation": "use 'previous_response_id' (the Conversations API is not implemented)",
    "context_management": "context management is not implemented",
    "prompt": "stored prompt templates are not implemented",
    "reasoning": "the model is not a reasoning model",
}
HONOURED = ("model", "input", "instructions", "stream", "stream_options", "max_output_tokens", "temperature",
            "top_p", "text", "previous_response_id", "store", "metadata", "include", "top_logprobs", "tools",
            "tool_choice", "parallel_tool_calls", "max_tool_calls", "truncation", "service_tier",
            "prompt_cache_retention")
METADATA_FIELDS = ("user", "safety_identifier", "prompt_cache_key")
# The extensions (sampling fields and the opt-in guardrail) pass to the chat form as sent.
KNOWN_FIELDS = HONOURED + METADATA_FIELDS + tuple(REFUSED) + EXTENSIONS + (GUARDRAIL,)
_INPUT_ROLES = ("user", "assistant", "system", "developer")
_ITEM_FIELDS = ("type", "role", "content", "id", "status")
_TEXT_PARTS = ("input_text", "output_text")
_CALL_FIELDS = ("type", "id", "call_id", "name", "arguments", "status")
_RESULT_FIELDS = ("type", "id", "call_id", "output", "status")


@dataclass
class ResponsesRequest:
    """One validated Responses request; ``input_messages`` are its input items as chat messages."""

    model: str
    input: str | list
    input_messages: list[dict]
    instructions: str | None = None
    stream: bool = False
    max_output_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    previous_response_id: str | None = None
    store: bool = True
    metadata: dict = field(default_factory=dict)
    top_logprobs: int | None = None  # None: no logprobs in output_text (not in ``include``)
    text_format: dict | None = None  # text.format as sent
    tools: list = field(default_factory=list)  # function tools as sent (the flat Responses form)
    tool_choice: str | dict | None = None  # as sent
    parallel_tool_calls: bool = True  # echoed as sent; an answer here holds at most one call, which both allow
    extensions: dict = field(default_factory=dict)
    recorded: dict = field(default_factory=dict)  # user, safety_identifier, prompt_cache_key as sent
    endpoint = "responses"

    @property
    def may_call(self) -> bool:
        """Whether the answer may be a function call (tools given, and tool_choice is not "none")."""
        return bool(self.tools) and self.tool_choice != "none"

    def to_payload(self) -> dict:
        """The JSON body a client sends: required fields, the common ones, and anything non-default."""
        payload: dict = {"model": self.model}
        if self.instructions is not None:
            payload["instructions"] = self.instructions
        payload["input"] = self.input
        payload |= {"temperature": self.temperature, "top_p": self.top_p}
        if self.max_output_tokens is not None:
            payload["max_output_tokens"] = self.max_output_tokens
        payload["stream"] = self.stream
        if self.previous_response_id is not None:
            payload["previous_response_id"] = self.previous_response_id
        if not self.store:
            payload["store"] = False
        if self.metadata:
            payload["metadata"] = self.metadata
        if self.top_logprobs is not None:
            payload |= {"include": [LOGPROBS_INCLUDE], "top_logprobs": self.top_logprobs}
        if self.text_format is not None:
            payload["text"] = {"format": self.text_format}
        if self.tools:
            payload["tools"] = self.tools
        if self.tool_choice is not None:
            payload["tool_choice"] = self.tool_choice
        if not self.parallel_tool_calls:
            payload["parallel_tool_calls"] = False
        return payload | self.extensions | self.recorded

    def wire_body(self) -> bytes:
        return json.dumps(self.to_payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def to_chat(self, history: Sequence[Mapping] = ()) -> ChatRequest:
        """The chat-completions request that runs this one: instructions as the system message (never
        carried over from a previous response, as OpenAI does), then ``history`` (the stored
        conversation of ``previous_response_id``), then this request's input."""
        system = [{"role": "system", "content": self.instructions}] if self.instructions else []
        payload = {
            "model": self.model,
            "messages": system + [dict(m) for m in history] + self.input_messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_output_tokens,
            "stream": self.stream,
            "logprobs": self.top_logprobs is not None or None,
            "top_logprobs": self.top_logprobs,
            "response_format": response_format(self.text_format),
            "tools": [chat_tool(tool) for tool in self.tools] or None,
            "tool_choice": chat_tool_choice(self.tool_choice),
            **self.extensions,
            **self.recorded,
        }
        try:
            return validate_request(payload)
        except LifecycleError as error:
            if error.param and error.param.startswith("response_format"):
                raise LifecycleError(text_format_words(error.message), text_format_words(error.param),
                                     error.code) from error
            if error.param and error.param.startswith(("tools", "tool_choice")):
                raise LifecycleError(error.message.replace(".function", "").replace('"function": {"name": ...}}',
                                                                                       '"name": ...}'),
                                     error.param.replace(".function", ""), error.code) from error
            raise


def text_format_words(text: str) -> str:
    """A chat ``response_format`` path in Responses words: ``text.format``, whose json_schema fields
    sit at its top level (``response_format.json_schema.schema`` is ``text.format.schema``)."""
    return text.replace("response_format.json_schema", "text.format").replace("response_format", "text.format")


def chat_tool(tool: Mapping) -> dict:
    """Chat's form of a Responses function tool: the same fields, nested under ``function``."""
    return {"type": "function", "function": {key: value for key, value in tool.items() if key != "type"}}


def chat_tool_choice(choice: str | Mapping | None) -> str | dict | None:
    """Chat's ``tool_choice`` for a Responses one (``{"type": "function", "name": ...}`` is flat there too)."""
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def response_format(text_format: Mapping | None) -> dict | None:
    """Chat's ``response_format`` for a Responses ``text.format``: the json_schema fields sit one
    level deeper in chat (``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``)."""
    if text_format is None:
        return None
    if text_format.get("type") != "json_schema":
        return dict(text_format)
    inner = {key: value for key, value in text_format.items() if key != "type"}
    return {"type": "json_schema", "json_schema": inner}


def _text(content: object, where: str, name: str = "content") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise f.invalid_type(f"{where}.{name}", "a string or an array of text parts", content)
    texts = []
    for index, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str)):
            raise LifecycleError(
                f"Invalid '{where}.{name}[{index}]': this model accepts only text parts "
                '({"type": "input_text", "text": "..."}).', f"{where}.{name}[{index}]", "invalid_value",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _item(item: object, index: int) -> dict:
    where = f"input[{index}]"
    if not isinstance(item, dict):
        raise f.invalid_type(where, "a message item", item)
    kind = item.get("type", "message")
    if kind == "function_call":
        return _function_call(item, where)
    if kind == "function_call_output":
        return _function_call_output(item, where)
    if kind != "message":
        raise LifecycleError(f"Unsupported value: '{where}.type' {f.shown(kind)}: only message, function_call and "
                             "function_call_output items are supported.", f"{where}.type", "unsupported_value")
    _known(item, _ITEM_FIELDS, where)
    role = item.get("role")
    if role not in _INPUT_ROLES:
        raise LifecycleError(f"Invalid value for '{where}.role': {f.shown(role)}. Supported values are: "
                             + ", ".join(f"'{r}'" for r in _INPUT_ROLES) + ".", f"{where}.role", "invalid_value")
    if "content" not in item:
        raise LifecycleError(f"Missing required parameter: '{where}.content'.", f"{where}.content",
                             "missing_required_parameter")
    return {"role": "system" if role == "developer" else role, "content": _text(item["content"], where)}


def _known(item: Mapping, fields: Sequence[str], where: str) -> None:
    unknown = sorted(set(item) - set(fields))
    if unknown:
        raise LifecycleError(f"Unrecognized argument in '{where}': {', '.join(map(str, unknown))}.",
                             f"{where}.{unknown[0]}", "unknown_parameter")


def _required_string(item: Mapping, name: str, where: str) -> str:
    value = item.get(name)
    if value is None:
        raise LifecycleError(f"Missing required parameter: '{where}.{name}'.", f"{where}.{name}",
                             "missing_required_parameter")
    if not isinstance(value, str):
        raise f.invalid_type(f"{where}.{name}", "a string", value)
    return value


def _function_call(item: Mapping, where: str) -> dict:
    """A call the model made earlier, sent back: chat's assistant message with ``tool_calls``."""
    _known(item, _CALL_FIELDS, where)
    call_id, name = _required_string(item, "call_id", where), _required_string(item, "name", where)
    arguments = _required_string(item, "arguments", where)
    try:
        json.loads(arguments)
    except ValueError:
        raise LifecycleError(f"Invalid '{where}.arguments': not valid JSON.", f"{where}.arguments",
                             "invalid_value") from None
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _function_call_output(item: Mapping, where: str) -> dict:
    """The result of a call, from the client: chat's ``tool`` message."""
    _known(item, _RESULT_FIELDS, where)
    call_id = _required_string(item, "call_id", where)
    return {"role": "tool", "tool_call_id": call_id, "content": _text(item.get("output"), where, "output")}


def _input(payload: Mapping) -> tuple[str | list, list[dict]]:
    if "input" not in payload or payload["input"] is None:
        raise LifecycleError("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    value = payload["input"]
    if isinstance(value, str):
        if not value.strip():
            raise LifecycleError("Invalid 'input': empty text.", "input", "empty_content")
        return value, [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise f.invalid_type("input", "a string or an array of input items", value)
    if not value:
        raise LifecycleError("Invalid 'input': empty array. Expected an array with minimum length 1.", "input",
                             "empty_array")
    return value, [_item(item, index) for index, item in enumerate(value)]


def _text_format(payload: Mapping) -> dict | None:
    """``text.format`` as sent (checked with the chat rules for ``response_format`` by ``to_chat``)."""
    text = payload.get("text")
    if text is None:
        return None
    if not isinstance(text, dict):
        raise f.invalid_type("text", "an object", text)
    f.refuse_unknown({f"text.{k}": v for k, v in text.items()}, ("text.format", "text.verbosity"))
    f.refuse_unsupported({"text.verbosity": text.get("verbosity")}, {"text.verbosity": "not a reasoning model"})
    form = text.get("format")
    if form is None:
        return None
    if not isinstance(form, dict) or not isinstance(form.get("type"), str):
        raise f.invalid_type("text.format", "an object with a 'type'", form)
    return dict(form)


def _tools(payload: Mapping) -> list:
    """The function tools as sent; built-in tools (web_search, file_search, ...) are refused, naming ``tools``.
    Their fields, and ``tool_choice``, are checked by the chat rules in ``to_chat``."""
    tools = payload.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise f.invalid_type("tools", "an array of tools", tools)
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise f.invalid_type(f"tools[{index}]", "a tool object", tool)
        if tool.get("type") != "function":
            raise LifecycleError(f"Unsupported value: 'tools[{index}].type' {f.shown(tool.get('type'))}: this server "
                                 "has only function tools (no built-in tools such as web_search or file_search).",
                                 "tools", "unsupported_value")
        _known(tool, ("type", "name", "description", "parameters", "strict"), f"tools[{index}]")
    choice = payload.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        _known(choice, ("type", "name"), "tool_choice")
    f.integer(payload, "max_tool_calls", 1)
    return [dict(tool) for tool in tools]


def _logprobs(payload: Mapping) -> int | None:
    include = payload.get("include")
    if include is not None and (not isinstance(include, list) or not all(isinstance(i, str) for i in include)):
        raise f.invalid_type("include", "an array of strings", include)
    for value in include or []:
        if value != LOGPROBS_INCLUDE:
            raise LifecycleError(f"Unsupported value: 'include' {f.shown(value)} is not supported with this server "
                                 f"(only '{LOGPROBS_INCLUDE}').", "include", "unsupported_value")
    top = f.integer(payload, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if include:
        return top or 0
    if top is not None:
        raise LifecycleError(f"Invalid 'top_logprobs': it needs 'include': ['{LOGPROBS_INCLUDE}'].", "top_logprobs",
                             "invalid_value")
    return None


def _stream_options(payload: Mapping, stream: bool) -> None:
    options = payload.get("stream_options")
    if options is None:
        return
    if not stream:
        raise LifecycleError("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                             "stream_options", "invalid_value")
    if not isinstance(options, dict):
        raise f.invalid_type("stream_options", "an object", options)
    f.refuse_unknown({f"stream_options.{k}": v for k, v in options.items()}, ("stream_options.include_obfuscation",))
    if f.boolean(options, "include_obfuscation"):
        raise LifecycleError("Unsupported value: 'stream_options.include_obfuscation' true is not supported.",
                             "stream_options.include_obfuscation", "unsupported_value")


def validate_responses_request(payload: object, *, known_models: Sequence[str] | None = None) -> ResponsesRequest:
    """Check decoded JSON against the Responses rules; raises LifecycleError naming the field."""
    if not isinstance(payload, dict):
        raise LifecycleError(f"The request body must be a JSON object, got {f.type_name(payload)}.", None,
                             "invalid_request_body")
    f.refuse_unknown(payload, KNOWN_FIELDS)
    f.refuse_unsupported(payload, REFUSED)
    text_format = _text_format(payload)
    tools = _tools(payload)
    f.one_of(payload, "truncation", ("disabled",), "a prompt that does not fit is refused, never cut")
    f.one_of(payload, "service_tier", ("auto", "default"), "one local model, one tier")
    f.one_of(payload, "prompt_cache_retention", ("in_memory",), "the prefix cache lives in memory")
    stream = f.boolean(payload, "stream")
    _stream_options(payload, stream)
    raw_input, messages = _input(payload)
    instructions = f.string(payload, "instructions", 256_000)
    previous = f.string(payload, "previous_response_id", 128)
    request = ResponsesRequest(
        model=model_field(payload, known_models),
        input=raw_input,
        input_messages=messages,
        instructions=instructions,
        stream=stream,
        max_output_tokens=f.integer(payload, "max_output_tokens", 1),
        temperature=sampling_number(payload, "temperature"),
        top_p=sampling_number(payload, "top_p"),
        previous_response_id=previous,
        store=f.boolean(payload, "store", default=True),
        metadata=f.metadata(payload) or {},
        top_logprobs=_logprobs(payload),
        text_format=text_format,
        tools=tools,
        tool_choice=payload.get("tool_choice"),
        parallel_tool_calls=f.boolean(payload, "parallel_tool_calls", default=True),
        extensions={name: payload[name] for name in (*EXTENSIONS, GUARDRAIL) if payload.get(name) is not None},
        recorded={name: payload[name] for name in METADATA_FIELDS if payload.get(name) is not None},
    )
    request.to_chat()  # text.format, the extensions and metadata fields are checked by the chat rules
    return request


def responses_request(
    prompt: str, system: str | None = None, history: Sequence[Mapping] = (), *, model: str | None = None,
    temperature: float = 1.0, top_p: float = 1.0, max_output_tokens: int | None = None, stream: bool = False,
    extensions: Mapping | None = None,
) -> ResponsesRequest:
    """The Responses request for the same conversation the app sends as a chat completion: the
    system prompt becomes ``instructions``, a lone prompt a plain string ``input``."""
    items = [{"role": m["role"], "content": m["content"]} for m in history]
    payload = {
        "model": model or model_name(),
        "instructions": system or None,
        "input": items + [{"role": "user", "content": prompt}] if items else prompt,
        "temperature": temperature,
        "top_p": top_p,
        "max_output_tokens": max_output_tokens,
        "stream": stream,
        **{k: v for k, v in (extensions or {}).items() if v is not None},
    }
    return validate_responses_request(payload)


# Chat-completions fields with no Responses equivalent (OpenAI's Responses API has none of them).
NO_RESPONSES_EQUIVALENT = ("stop", "seed", "n", "presence_penalty", "frequency_penalty", "logit_bias",
                           "stream_options")


@dataclass(frozen=True)
class WireDifference:
    """One way the same call looks different on the two endpoints."""

    aspect: str
    chat_completions: str
    responses: str


def as_responses_request(chat: ChatRequest) -> ResponsesRequest:
    """The Responses request that asks what ``chat`` asks: a leading system message becomes
    ``instructions``, a lone user message a plain string ``input``, the rest message items.
    Fields the Responses API lacks (NO_RESPONSES_EQUIVALENT) are left out."""
    messages = list(chat.messages)
    system = messages.pop(0)["content"] if messages and messages[0]["role"] == "system" else None
    history, prompt = messages[:-1], messages[-1]["content"]
    payload = chat.to_payload()
    return responses_request(
        prompt, system, history, model=chat.model, temperature=chat.sampling.temperature, top_p=chat.sampling.top_p,
        max_output_tokens=chat.max_tokens, stream=chat.stream,
        extensions={name: payload[name] for name in EXTENSIONS if name in payload},
    )


def wire_differences(chat: ChatRequest, responses: ResponsesRequest) -> list[WireDifference]:
    """What differs on the wire between the two forms of one call, with this call's values."""
    system = chat.messages[0]["role"] == "system"
    dropped = [name for name in NO_RESPONSES_EQUIVALENT if name in chat.to_payload()]
    rows = [
        WireDifference("endpoint", "POST /v1/chat/completions", "POST /v1/responses"),
        WireDifference("system prompt", "messages[0] with role \"system\"" if system else "(none)",
                       "instructions" if responses.instructions else "(none)"),
        WireDifference("the conversation", f"messages: {counted(len(chat.messages), 'message')}, sent again every turn",
                       "input: a string" if isinstance(responses.input, str)
                       else f"input: {counted(len(responses.input), 'item')}; or previous_response_id, and the server "
                            "keeps the rest"),
        WireDifference("length limit", f"max_tokens: {chat.max_tokens}",
                       f"max_output_tokens: {responses.max_output_tokens}"),
        WireDifference("body size", f"{len(chat.wire_body()):,} bytes", f"{len(responses.wire_body()):,} bytes"),
        WireDifference("the answer", "choices[0].message.content", "output[0].content[0].text (SDK: output_text)"),
        WireDifference("usage", "prompt_tokens, completion_tokens", "input_tokens, output_tokens"),
        WireDifference("streaming", "data: chunks, then data: [DONE]", "named events, last response.completed"),
    ]
    if dropped:
        rows.append(WireDifference("no equivalent", ", ".join(dropped), "(not sent: the Responses API has none)"))
    return rows
