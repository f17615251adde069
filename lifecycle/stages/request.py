"""Stage 1, the request: the chat-completions call a client sends, checked with OpenAI's rules.

``validate_request`` turns arbitrary decoded JSON into a ``ChatRequest`` or raises a
``LifecycleError`` naming the parameter. Every field of OpenAI's CreateChatCompletionRequest is
either honoured, recorded as metadata (``user``, ``metadata``, ``store``, ``safety_identifier``,
``prompt_cache_key``), accepted only with the one value this server has (``modalities: ["text"]``,
``service_tier: "auto"``...), or refused with 400 naming it; a field OpenAI does not know is
refused too. ``chat_request`` builds a request from the app's settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Mapping, Sequence

from lifecycle.errors import LifecycleError
from lifecycle.features.guardrail import Guardrail, parse_guardrail
from lifecycle.features.tools import OutputRules, output_rules
from lifecycle.model import model_name
from lifecycle.stages.sampling import LIMITS, LOGIT_BIAS_LIMIT, SEED_LIMIT, SamplingSettings
from lifecycle.stages import json_fields as f

ROLES = ("system", "user", "assistant", "tool")
# OpenAI's newer name for the system role; accepted and stored as "system" (the ChatML template
# of the local model only knows system/user/assistant/tool).
ROLE_ALIASES = {"developer": "system"}
MAX_STOP_SEQUENCES = 4
MAX_TOP_LOGPROBS = 20
MAX_CHOICES = 8  # n: each choice is one more concurrent generation on a 2-core machine
MAX_LOGIT_BIAS_ENTRIES = 300  # OpenAI's limit
DEFAULT_MAX_TOKENS = 128
# Fields the openai SDKs do not know as keyword arguments: the Python snippet sends them in extra_body.
EXTENSIONS = ("top_k", "min_p", "repetition_penalty")
# Recorded with the call (journey and call log); they change nothing in the generation.
METADATA_FIELDS = ("user", "metadata", "store", "safety_identifier", "prompt_cache_key")
# Known to OpenAI, impossible here: 400 naming the field whenever it is sent with a value.
REFUSED = {
    "audio": "the model writes text only",
    "prediction": "predicted outputs are not implemented",
    "reasoning_effort": "the model is not a reasoning model",
    "verbosity": "the model is not a reasoning model",
    "web_search_options": "there is no web search",
    "functions": "use 'tools' (the deprecated functions API is not implemented)",
    "function_call": "use 'tool_choice' (the deprecated functions API is not implemented)",
}
HONOURED = (
    "model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "stream", "stream_options",
    "seed", "stop", "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "response_format", "modalities", "service_tier", "prompt_cache_retention",
    "tools", "tool_choice", "parallel_tool_calls",
)
# Structured output and tools: validated together (lifecycle.features.tools.output_rules), sent as given.
OUTPUT_FIELDS = ("response_format", "tools", "tool_choice", "parallel_tool_calls")
DEFAULT_RESPONSE_FORMAT = {"type": "text"}
# This server's output check, opt-in: {"guardrail": {"block": [...]}} (lifecycle.features.guardrail).
GUARDRAIL = "guardrail"
KNOWN_FIELDS = HONOURED + METADATA_FIELDS + tuple(REFUSED) + EXTENSIONS + (GUARDRAIL,)
_MESSAGE_FIELDS = ("role", "content", "name", "refusal", "tool_calls", "tool_call_id", "function_call", "audio",
                   "annotations")


# The fields to_payload writes only when they differ from their default, in the order it writes them.
_OPTIONAL = ("stream_options", "seed", "stop", "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
             "top_logprobs", "top_k", "min_p", "repetition_penalty")


@dataclass
class ChatRequest:
    """One validated chat-completions request. ``max_tokens`` None means "as many as fit".

    ``sampling`` holds the sampling settings its choices share; ``seed`` is the seed as sent (OpenAI
    allows any 64-bit integer), from which each choice draws with its own (``sampling_settings``)."""

    model: str
    messages: list[dict]
    sampling: SamplingSettings = SamplingSettings()
    max_tokens: int | None = None
    stream: bool = False
    stream_options: dict | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    n: int = 1
    logprobs: bool = False
    top_logprobs: int | None = None
    metadata: dict = field(default_factory=dict)  # user, metadata, store, ... as sent (recorded, not used)
    output: OutputRules = field(default_factory=OutputRules)
    output_fields: dict = field(default_factory=dict)  # response_format, tools, ... as sent
    guardrail: Guardrail | None = None
    endpoint = "chat/completions"

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.get("include_usage"))

    @property
    def logprobs_count(self) -> int | None:
        """How many alternatives each token's logprobs carry (None: no logprobs asked)."""
        return (self.top_logprobs or 0) if self.logprobs else None

    def to_payload(self) -> dict:
        """The JSON body a client sends: required fields, the common ones, and anything non-default."""
        sent = self._defaulted_fields()
        payload: dict = {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "temperature": sent["temperature"],
            "top_p": sent["top_p"],
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        payload["stream"] = self.stream
        unsent = ChatRequest(self.model, self.messages)._defaulted_fields()  # a body that sent none of them
        payload.update({name: sent[name] for name in _OPTIONAL if sent[name] != unsent[name]})
        if self.guardrail is not None:
            payload[GUARDRAIL] = {"block": list(self.guardrail.block)}
        return payload | self.output_fields | self.metadata

    def wire_body(self) -> bytes:
        """The body exactly as the openai Python SDK (httpx) puts it on the wire: compact UTF-8 JSON."""
        return json.dumps(self.to_payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def _defaulted_fields(self) -> dict:
        """Every field of the body that has a default (temperature and top_p among them), with its value here."""
        return sampling_fields(self.sampling) | {
            "stream_options": self.stream_options, "seed": self.seed, "stop": list(self.stop), "n": self.n,
            "logprobs": self.logprobs, "top_logprobs": self.top_logprobs,
        }


def sampling_fields(sampling: SamplingSettings) -> dict:
    """The sampling settings as the body's fields: logit_bias keyed by token ids written as strings."""
    return asdict(sampling) | {"logit_bias": {str(token_id): bias for token_id, bias in sampling.logit_bias}}


# --- messages ---------------------------------------------------------------------------------


def _content(message: Mapping, where: str) -> str:
    """A message's text: a string, or an array of text parts joined by newlines (text-only model)."""
    param = f"{where}.content"
    if message.get("content") is None and message.get("role") == "assistant" and message.get("tool_calls"):
        return ""  # OpenAI: content is optional on an assistant message that calls tools
    if "content" not in message:
        raise LifecycleError(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    content = message["content"]
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise f.invalid_type(param, "a string or an array of text parts", content)
    texts = []
    for index, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            raise LifecycleError(
                f"Invalid '{param}[{index}]': this model accepts only text parts "
                '({"type": "text", "text": "..."}).',
                param=f"{param}[{index}]",
                code="invalid_value",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _message(message: object, index: int) -> dict:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise f.invalid_type(where, "an object with 'role' and 'content'", message)
    if "role" not in message:
        raise LifecycleError(
            f"Missing required parameter: '{where}.role'.", f"{where}.role", "missing_required_parameter"
        )
    unknown = sorted(set(message) - set(_MESSAGE_FIELDS))
    if unknown:
        raise LifecycleError(f"Unrecognized argument in '{where}': {', '.join(map(str, unknown))}.",
                             f"{where}.{unknown[0]}", "unknown_parameter")
    if message.get("name") is not None:
        raise LifecycleError(
            f"Unsupported parameter: '{where}.name': the model's chat template has no place for participant names.",
            f"{where}.name", "unsupported_parameter",
        )
    role = message["role"]
    if not isinstance(role, str):
        raise f.invalid_type(f"{where}.role", "a string", role)
    role = ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        raise LifecycleError(
            f"Invalid value for '{where}.role': {f.shown(role)}. Supported values are: "
            + ", ".join(f"'{r}'" for r in ROLES + tuple(ROLE_ALIASES)) + ".",
            param=f"{where}.role",
            code="invalid_value",
        )
    content = _content(message, where)
    if role == "user" and not content.strip():
        raise LifecycleError(
            f"Invalid '{where}.content': a user message must not be empty or whitespace only.",
            param=f"{where}.content",
            code="empty_content",
        )
    # Tool calls and results travel on for the chat template (the grammar stage renders them).
    kept = {name: message[name] for name in ("tool_calls", "tool_call_id") if message.get(name) is not None}
    return {"role": role, "content": content, **kept}


def _messages(payload: Mapping) -> list[dict]:
    if "messages" not in payload:
        raise LifecycleError("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    messages = payload["messages"]
    if not isinstance(messages, list):
        raise f.invalid_type("messages", "an array of messages", messages)
    if not messages:
        raise LifecycleError(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages", "empty_array"
        )
    return [_message(message, index) for index, message in enumerate(messages)]


# --- parameters -------------------------------------------------------------------------------


def model_field(payload: Mapping, known_models: Sequence[str] | None) -> str:
    model = payload.get("model")
    if model is None:
        raise LifecycleError("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    if not isinstance(model, str) or not model.strip():
        raise f.invalid_type("model", "a non-empty string", model)
    if known_models is not None and model not in known_models:
        raise LifecycleError(
            f"The model {f.shown(model)} does not exist or you do not have access to it.", "model", "model_not_found"
        )
    return model


def _stop(payload: Mapping) -> list[str]:
    stop = payload.get("stop")
    if stop is None:
        return []
    sequences = [stop] if isinstance(stop, str) else stop
    if not isinstance(sequences, list) or not all(isinstance(s, str) for s in sequences):
        raise f.invalid_type("stop", "a string or an array of strings", stop)
    if len(sequences) > MAX_STOP_SEQUENCES:
        raise LifecycleError(
            f"Invalid 'stop': at most {MAX_STOP_SEQUENCES} sequences, got {len(sequences)}.",
            "stop",
            "array_above_max_length",
        )
    if any(s == "" for s in sequences):
        raise LifecycleError("Invalid 'stop': a stop sequence must not be empty.", "stop", "invalid_value")
    return list(sequences)


def _max_tokens(payload: Mapping) -> int | None:
    # max_completion_tokens is the newer name; when both are sent it wins, but both must be valid.
    legacy = f.integer(payload, "max_tokens", 1)
    newer = f.integer(payload, "max_completion_tokens", 1)
    return newer if newer is not None else legacy


def _stream_options(payload: Mapping, stream: bool) -> dict | None:
    options = payload.get("stream_options")
    if options is None:
        return None
    if not stream:
        raise LifecycleError(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            "invalid_value",
        )
    if not isinstance(options, dict):
        raise f.invalid_type("stream_options", "an object", options)
    f.refuse_unknown({f"stream_options.{k}": v for k, v in options.items()},
                     ("stream_options.include_usage", "stream_options.include_obfuscation"))
    if f.boolean(options, "include_obfuscation"):
        raise LifecycleError("Unsupported value: 'stream_options.include_obfuscation' true is not supported with "
                             "this server (no obfuscation padding is sent).", "stream_options.include_obfuscation",
                             "unsupported_value")
    include_usage = options.get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise f.invalid_type("stream_options.include_usage", "a boolean", include_usage)
    return {"include_usage": bool(include_usage)}


def _logprobs(payload: Mapping) -> tuple[bool, int | None]:
    logprobs = f.boolean(payload, "logprobs")
    top = f.integer(payload, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise LifecycleError(
            "Invalid 'top_logprobs': it can only be used when 'logprobs' is true.", "top_logprobs", "invalid_value"
        )
    return logprobs, top


def sampling_number(payload: Mapping, name: str) -> float:
    """A numeric sampling field checked against its limit (lifecycle.stages.sampling.LIMITS); its default when not sent."""
    limit = LIMITS[name]
    return f.number(payload, name, getattr(SamplingSettings(), name), limit.low, limit.high, low_open=limit.low_open)


def _generation(payload: Mapping, stream: bool) -> dict:
    """The fields that shape the generation, checked in this order (of several wrong ones, the first here
    is the one reported), the sampling settings among them gathered into ``sampling``; the seed stays
    with the request (see ChatRequest)."""
    checked = {
        "temperature": sampling_number(payload, "temperature"),
        "top_p": sampling_number(payload, "top_p"),
        "max_tokens": _max_tokens(payload),
        "stream_options": _stream_options(payload, stream),
        "seed": f.integer(payload, "seed", f.INT64_MIN),
        "stop": _stop(payload),
        "n": f.integer(payload, "n", 1, MAX_CHOICES) or 1,
        "top_k": f.integer(payload, "top_k", 0) or 0,
        "min_p": sampling_number(payload, "min_p"),
        "repetition_penalty": sampling_number(payload, "repetition_penalty"),
        "presence_penalty": sampling_number(payload, "presence_penalty"),
        "frequency_penalty": sampling_number(payload, "frequency_penalty"),
        "logit_bias": tuple(sorted(_logit_bias(payload).items())),
    }
    sampling = SamplingSettings(**{name: checked.pop(name) for name in (*LIMITS, "top_k", "logit_bias")})
    return checked | {"sampling": sampling}


def _logit_bias(payload: Mapping) -> dict[int, float]:
    """Token id (a JSON object key, so a string of digits) -> bias in [-100, 100]."""
    bias = payload.get("logit_bias")
    if bias is None:
        return {}
    if not isinstance(bias, dict):
        raise f.invalid_type("logit_bias", "an object mapping token ids to numbers", bias)
    if len(bias) > MAX_LOGIT_BIAS_ENTRIES:
        raise LifecycleError(f"Invalid 'logit_bias': at most {MAX_LOGIT_BIAS_ENTRIES} entries, got {len(bias)}.",
                             "logit_bias", "object_above_max_size")
    parsed = {}
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()):
            raise LifecycleError(f"Invalid 'logit_bias': keys must be token ids (integers as strings), got "
                                 f"{f.shown(key)}.", "logit_bias", "invalid_value")
        parsed[int(key)] = f.checked_number(f"logit_bias.{key}", value, LOGIT_BIAS_LIMIT.low, LOGIT_BIAS_LIMIT.high)
    return parsed


def check_token_ids(request: ChatRequest, vocab_size: int) -> None:
    """logit_bias may only name tokens the model has (the vocabulary is known once it is loaded)."""
    unknown = [token_id for token_id, _ in request.sampling.logit_bias if token_id >= vocab_size]
    if unknown:
        raise LifecycleError(
            f"Invalid 'logit_bias': token id {unknown[0]} is not in the model's vocabulary (ids 0 to {vocab_size - 1}).",
            "logit_bias", "invalid_value",
        )


def _output(payload: Mapping) -> OutputRules:
    """response_format, tools and tool_choice, checked together; parallel_tool_calls is honoured
    trivially (an answer holds at most one call, which both true and false allow)."""
    f.boolean(payload, "parallel_tool_calls", default=None)
    return output_rules(payload.get("response_format"), payload.get("tools"), payload.get("tool_choice"))


def _modalities(payload: Mapping) -> None:
    value = payload.get("modalities")
    if value is not None and value != ["text"]:
        raise LifecycleError("Unsupported value: 'modalities' must be [\"text\"]: the model writes text only.",
                             "modalities", "unsupported_value")


def _metadata(payload: Mapping) -> dict:
    recorded = {
        "user": f.string(payload, "user", 256),
        "safety_identifier": f.string(payload, "safety_identifier", 64),
        "prompt_cache_key": f.string(payload, "prompt_cache_key", 1024),
        "metadata": f.metadata(payload),
        "store": f.boolean(payload, "store", default=None),
    }
    return {name: value for name, value in recorded.items() if value is not None}


def validate_request(payload: object, *, known_models: Sequence[str] | None = None) -> ChatRequest:
    """Check decoded JSON against the chat-completions rules.

    Raises ``LifecycleError`` with ``param`` naming the offending field; ``code`` follows OpenAI's
    ("invalid_type", "decimal_above_max_value", "unknown_parameter", ...) and is "model_not_found"
    for a model outside ``known_models`` (a 404 on the API).
    """
    if not isinstance(payload, dict):
        raise LifecycleError(
            f"The request body must be a JSON object, got {f.type_name(payload)}.", None, "invalid_request_body"
        )
    f.refuse_unknown(payload, KNOWN_FIELDS)
    f.refuse_unsupported(payload, REFUSED)
    output = _output(payload)
    _modalities(payload)
    f.one_of(payload, "service_tier", ("auto", "default"), "one local model, one tier")
    f.one_of(payload, "prompt_cache_retention", ("in_memory",), "the prefix cache lives in memory")
    stream = f.boolean(payload, "stream")
    logprobs, top_logprobs = _logprobs(payload)
    return ChatRequest(
        model=model_field(payload, known_models),
        messages=_messages(payload),
        **_generation(payload, stream),
        stream=stream,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        metadata=_metadata(payload),
        output=output,
        output_fields={name: payload[name] for name in OUTPUT_FIELDS
                       if payload.get(name) is not None and payload[name] != DEFAULT_RESPONSE_FORMAT},
        guardrail=parse_guardrail(payload.get(GUARDRAIL)),
    )


def chat_request(
    prompt: str,
    system: str | None = None,
    history: Sequence[Mapping] = (),
    *,
    model: str | None = None,
    sampling: SamplingSettings = SamplingSettings(),
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    stream: bool = False,
    include_usage: bool = False,
    stop: Sequence[str] = (),
) -> ChatRequest:
    """The request the app sends for ``prompt``: optional system prompt, earlier turns, then the prompt,
    drawn with ``sampling`` (its seed becomes the request's)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise LifecycleError("The prompt is empty: type a message to send.", "prompt", "empty_content")
    messages = ([{"role": "system", "content": system}] if system else []) + [dict(m) for m in history]
    payload = {
        "model": model or model_name(),
        "messages": messages + [{"role": "user", "content": prompt}],
        **sampling_fields(sampling),
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": include_usage} if stream else None,
        "stop": list(stop) or None,
    }
    return validate_request(payload)


def sampling_settings(request: ChatRequest, choice: int = 0) -> SamplingSettings:
    """The sampling stage's settings for choice ``choice`` (n > 1 choices draw with consecutive seeds)."""
    seed = None if request.seed is None else (request.seed + choice) % SEED_LIMIT  # the API allows negative seeds
    return replace(request.sampling, seed=seed)
