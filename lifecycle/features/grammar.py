"""Grammar-constrained decoding: a JSON schema (or a tool-call format) becomes a grammar, and at
every step only the tokens that keep the output a valid prefix of that grammar may be sampled.

The grammar engine is llguidance (Microsoft's Rust library behind Guidance, with Python bindings
that need nothing but a 3 MB wheel): it compiles JSON schemas and Lark grammars, and for each
step fills a bitmask over the model's whole vocabulary (about 0.2 ms a step here; ``make bench``
measures it). Before any model work, ``check_schema`` refuses schemas this server will not
compile (size and nesting limits like OpenAI's, then llguidance's own check for unsupported
keywords, unsatisfiable bounds and bad patterns) with a ``LifecycleError`` naming the parameter.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from lifecycle.errors import LifecycleError

# OpenAI's published limits for structured-output schemas.
MAX_NESTING = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
MAX_REF_CHAIN = 10
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Fixed separators and no free whitespace: a small model given the choice pads JSON with endless
# newlines; with these the output looks like json.dumps' default.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
ANY_OBJECT = {"type": "object"}
# A number with no bound is one the model can extend forever ("1111111...", "1.0000000..."): the
# grammar keeps unbounded numbers within what a JavaScript client reads exactly (|n| <= 2^53 - 1)
# and, unless the schema sets multipleOf, to at most 6 decimal places (no exponent).
SAFE_INTEGER = 2**53 - 1
NUMBER_STEP = 1e-6


@dataclass(frozen=True)
class ResponseFormat:
    """The ``response_format`` of a request: "text", "json_object", or "json_schema" with its schema."""

    type: str
    schema: dict | None = None
    name: str | None = None
    strict: bool = False

    @property
    def constrained(self) -> bool:
        return self.type != "text"

    def json_schema(self) -> dict:
        """The schema the output must satisfy: the given one, or any JSON object for json_object."""
        return self.schema if self.schema is not None else ANY_OBJECT


def parse_response_format(value: object) -> ResponseFormat:
    """Validate a request's ``response_format`` (absent or null = plain text)."""
    if value is None:
        return ResponseFormat("text")
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise LifecycleError("Invalid 'response_format': expected an object with a 'type'.", "response_format", "invalid_type")
    kind = value["type"]
    if kind in ("text", "json_object"):
        _no_extra(value, {"type"}, "response_format")
        return ResponseFormat(kind)
    if kind != "json_schema":
        raise LifecycleError(
            f"Invalid 'response_format.type': {json.dumps(kind)[:80]}. Supported values are: 'text', 'json_object', 'json_schema'.",
            "response_format.type",
            "invalid_value",
        )
    _no_extra(value, {"type", "json_schema"}, "response_format")
    spec = value.get("json_schema")
    where = "response_format.json_schema"
    if not isinstance(spec, dict):
        raise LifecycleError(f"Missing required parameter: '{where}'.", where, "missing_required_parameter")
    _no_extra(spec, {"name", "description", "schema", "strict"}, where)
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise LifecycleError(
            f"Invalid '{where}.name': expected 1-64 letters, digits, underscores or dashes.", f"{where}.name", "invalid_value"
        )
    strict = spec.get("strict", False)
    if strict is not None and not isinstance(strict, bool):
        raise LifecycleError(f"Invalid '{where}.strict': expected a boolean.", f"{where}.strict", "invalid_type")
    schema = spec.get("schema", ANY_OBJECT)
    check_schema(schema, f"{where}.schema")
    if strict:
        check_strict(schema, f"{where}.schema", f"response_format '{name}'")
    return ResponseFormat("json_schema", schema, name, bool(strict))


def _no_extra(value: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(value) - allowed)
    if extra:
        raise LifecycleError(f"Unrecognized request argument supplied: '{where}.{extra[0]}'.", f"{where}.{extra[0]}", "unknown_parameter")


def check_schema(schema: object, param: str) -> None:
    """Refuse a schema this server cannot enforce: not an object, over the size and nesting limits,
    a $ref chain that never reaches a schema, or anything llguidance rejects."""
    if not isinstance(schema, dict):
        raise LifecycleError(f"Invalid '{param}': a JSON schema must be an object.", param, "invalid_type")
    counts = {"properties": 0, "enum": 0}
    _walk(schema, schema, param, depth=0, stack=(), counts=counts)
    problem = validate_grammar(json_grammar(schema))
    if problem:
        raise LifecycleError(f"Invalid '{param}': {one_line(problem)}", param, "invalid_schema")


# Keywords whose value maps names to schemas, and keywords whose value is a schema or a list of them.
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "prefixItems", "additionalProperties", "anyOf", "allOf", "oneOf", "not", "contains",
               "if", "then", "else")


def check_strict(schema: dict, param: str, subject: str) -> None:
    """OpenAI's rules for a ``strict: true`` schema (``subject``: "response_format 'name'" or "function
    'name'"), in its words: every object must set ``additionalProperties: false`` and list every property
    in ``required`` (optional means nullable). A non-strict schema is taken as JSON Schema reads it."""
    for path, node in _object_nodes(schema, ()):
        problem = _strict_problem(node)
        if problem:
            raise LifecycleError(f"Invalid schema for {subject}: In context={path!r}, {problem}", param,
                                 "invalid_schema")


def _object_nodes(node: object, path: tuple) -> Iterator[tuple[tuple, dict]]:
    """Every object schema in ``node`` with its path of keys (as OpenAI's ``context`` names it)."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _object_nodes(item, (*path, index))
        return
    if not isinstance(node, dict):
        return
    types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "object" in types or "properties" in node:
        yield path, node
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            for sub_name, sub in value.items():
                yield from _object_nodes(sub, (*path, key, sub_name))
        elif key in _SUBSCHEMAS:
            yield from _object_nodes(value, (*path, key))


def _strict_problem(node: dict) -> str | None:
    if node.get("additionalProperties") is not False:
        return "'additionalProperties' is required to be supplied and to be false."
    properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    required = node.get("required") if isinstance(node.get("required"), list) else []
    missing = [key for key in properties if key not in required]
    if missing:
        return ("'required' is required to be supplied and to be an array including every key in properties. "
                f"Missing '{missing[0]}'.")
    return None


def _walk(node: object, root: dict, param: str, depth: int, stack: tuple[str, ...], counts: dict) -> None:
    """Count properties and enum values and measure nesting, following $refs (a recursive $ref is
    walked once: recursion is allowed, the grammar repeats it)."""
    if isinstance(node, list):
        for item in node:
            _walk(item, root, param, depth, stack, counts)
        return
    if not isinstance(node, dict):
        return
    if depth > MAX_NESTING:
        raise LifecycleError(f"Invalid '{param}': nesting deeper than {MAX_NESTING} levels.", param, "invalid_schema")
    node = _resolve(node, root, param)
    ref = node.get("$ref") if isinstance(node.get("$ref"), str) else None
    if ref is not None and ref in stack:
        return
    if ref is not None:
        stack = stack + (ref,)
    counts["properties"] += len(node.get("properties") or {}) if isinstance(node.get("properties"), dict) else 0
    counts["enum"] += len(node["enum"]) if isinstance(node.get("enum"), list) else 0
    if counts["properties"] > MAX_PROPERTIES:
        raise LifecycleError(f"Invalid '{param}': more than {MAX_PROPERTIES} properties.", param, "invalid_schema")
    if counts["enum"] > MAX_ENUM_VALUES:
        raise LifecycleError(f"Invalid '{param}': more than {MAX_ENUM_VALUES} enum values in all.", param, "invalid_schema")
    nests = node.get("type") in ("object", "array") or "properties" in node or "items" in node
    for key, value in node.items():
        if key in ("$defs", "definitions", "enum", "const", "default", "examples", "description", "title"):
            continue
        if key == "properties" and isinstance(value, dict):
            for sub in value.values():
                _walk(sub, root, param, depth + 1, stack, counts)
        else:
            _walk(value, root, param, depth + (1 if nests and key in ("items", "additionalProperties") else 0), stack, counts)
    if ref is not None:
        _walk(_target(ref, root, param), root, param, depth, stack, counts)


def _resolve(node: dict, root: dict, param: str) -> dict:
    """Follow a chain of pure $ref nodes to the first real schema (at most MAX_REF_CHAIN hops)."""
    for _ in range(MAX_REF_CHAIN):
        ref = node.get("$ref")
        if not isinstance(ref, str) or len(node) > 1:
            return node
        target = _target(ref, root, param)
        if not (isinstance(target.get("$ref"), str) and len(target) == 1):
            return node
        node = target
    raise LifecycleError(f"Invalid '{param}': a chain of more than {MAX_REF_CHAIN} $refs.", param, "invalid_schema")


def _target(ref: str, root: dict, param: str) -> dict:
    if not ref.startswith("#"):
        raise LifecycleError(f"Invalid '{param}': only local $refs (#/...) are supported, got {ref[:80]!r}.", param, "invalid_schema")
    node: object = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise LifecycleError(f"Invalid '{param}': $ref {ref[:80]!r} does not point to a schema.", param, "invalid_schema")
    return node


def json_grammar(schema: dict) -> str:
    """The llguidance grammar for JSON values matching ``schema`` (numbers kept finite: safe_integers)."""
    import llguidance

    return llguidance.LLMatcher.grammar_from_json_schema(safe_integers(schema), defaults=JSON_OPTIONS)


def safe_integers(node: object) -> object:
    """A copy of a schema where every integer or number without a bound gets +-SAFE_INTEGER as its
    bound, and every number without multipleOf at most 6 decimal places."""
    if isinstance(node, list):
        return [safe_integers(item) for item in node]
    if not isinstance(node, dict):
        return node
    copy = {key: value if key in ("enum", "const", "default", "examples") else safe_integers(value) for key, value in node.items()}
    types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "number" in types and "multipleOf" not in node:
        copy["multipleOf"] = NUMBER_STEP
    if "integer" in types or "number" in types:
        if "maximum" not in node and "exclusiveMaximum" not in node:
            copy["maximum"] = SAFE_INTEGER
        if "minimum" not in node and "exclusiveMinimum" not in node:
            copy["minimum"] = -SAFE_INTEGER
    return copy


def lark_grammar(lark: str) -> str:
    import llguidance

    return llguidance.LLMatcher.grammar_from_lark(lark)


def one_line(message: str, limit: int = 300) -> str:
    """llguidance's multi-line error (with a caret drawing) as one short line."""
    return " ".join(message.replace("^", "").split())[:limit]


def validate_grammar(grammar: str) -> str:
    """"" when llguidance accepts the grammar, else its error message."""
    import llguidance

    return llguidance.LLMatcher.validate_grammar(grammar)


_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TOKENIZERS_LOCK = threading.Lock()


def grammar_tokenizer(loaded):
    """llguidance's view of the model's tokenizer (its token trie), built once per model (~0.7 s)."""
    import llguidance

    from lifecycle.stages.generation import end_of_sequence_ids

    with _TOKENIZERS_LOCK:
        cached = _TOKENIZERS.get(loaded.tokenizer)
        if cached is None:
            with loaded.tokenizer_lock:
                cached = llguidance.LLTokenizer(
                    loaded.tokenizer.to_json(), n_vocab=loaded.vocab_size, eos_token=sorted(end_of_sequence_ids(loaded))
                )
            _TOKENIZERS[loaded.tokenizer] = cached
        return cached


class GrammarConstraint:
    """One generation's position in a grammar: which tokens may come next, and the tokens so far.

    ``allowed()`` is a boolean mask over the vocabulary; ``accept(id)`` advances (a token the
    grammar forbids raises); ``complete`` is true once the grammar admits nothing but the end.
    """

    def __init__(self, loaded, grammar: str):
        import llguidance
        import llguidance.numpy

        self._tokenizer = grammar_tokenizer(loaded)
        self.vocab_size = loaded.vocab_size
        self._matcher = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if self._matcher.is_error():
            raise LifecycleError(f"The grammar does not compile: {self._matcher.get_error()[:300]}", "response_format")
        self._bits = llguidance.numpy.allocate_token_bitmask(1, self._tokenizer.vocab_size)
        self._fill = llguidance.numpy.fill_next_token_bitmask

    def allowed(self) -> np.ndarray:
        """The tokens that keep the output valid (end-of-sequence ids only when it may end here)."""
        self._fill(self._matcher, self._bits)
        if self._matcher.is_error():
            raise LifecycleError(f"The grammar matcher failed: {self._matcher.get_error()[:300]}", "response_format")
        mask = np.unpackbits(self._bits.view(np.uint8), bitorder="little")[: self.vocab_size].astype(bool)
        if not mask.any():
            raise LifecycleError("The grammar allows no next token.", "response_format")
        return mask

    def accept(self, token_id: int) -> None:
        if not self._matcher.consume_token(int(token_id)):
            raise LifecycleError(f"Token {token_id} is not allowed by the grammar here.", "forced")

    @property
    def complete(self) -> bool:
        return self._matcher.is_stopped()

    @property
    def accepting(self) -> bool:
        return self._matcher.is_accepting()


def json_constraint(loaded, schema: dict) -> GrammarConstraint:
    return GrammarConstraint(loaded, json_grammar(schema))
