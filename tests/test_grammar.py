"""Grammar-constrained decoding: schema checks before any model work, the mask on the real
tokenizer, the grammar stage in sampling, and 100% valid json_schema answers on the real model."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import numpy as np
import pytest

from lifecycle.stages.context_window import render_messages
from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import generate
from lifecycle.features.grammar import (
    MAX_ENUM_VALUES,
    MAX_NESTING,
    NUMBER_STEP,
    SAFE_INTEGER,
    GrammarConstraint,
    json_constraint,
    json_grammar,
    parse_response_format,
    safe_integers,
)
from lifecycle.stages.sampling import STAGES, SamplingSettings, apply_sampling
from lifecycle.features.tools import output_rules
from tests.structured_cases import CASES, SCHEMAS

GREEDY = SamplingSettings(temperature=0)
CONCURRENT = 8  # requests in the engine at once (its batch)


def json_schema_format(schema, name="answer"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"inner": schema}, "required": ["inner"], "additionalProperties": False}
    return schema


@pytest.mark.parametrize(
    ("value", "param", "words"),
    [
        ({"type": "xml"}, "response_format.type", "Supported values"),
        ("json", "response_format", "object"),
        ({"type": "json_schema"}, "response_format.json_schema", "Missing"),
        (json_schema_format({"type": "object"}, name="has space"), "response_format.json_schema.name", "letters"),
        (json_schema_format({"type": "object", "if": {}, "then": {}}), "response_format.json_schema.schema", "if"),
        (json_schema_format({"type": "string", "pattern": "(?=a)b"}), "response_format.json_schema.schema", "look"),
        (json_schema_format({"type": "integer", "minimum": 3, "maximum": 1}), "response_format.json_schema.schema",
         "Unsatisfiable"),
        (json_schema_format({"enum": list(range(MAX_ENUM_VALUES + 1))}), "response_format.json_schema.schema",
         f"{MAX_ENUM_VALUES} enum"),
        (json_schema_format(nested(MAX_NESTING + 2)), "response_format.json_schema.schema", "nesting"),
        (json_schema_format({"$ref": "#/$defs/missing"}), "response_format.json_schema.schema", "does not point"),
        (json_schema_format({"$ref": "https://example.com/s.json"}), "response_format.json_schema.schema", "local"),
        (json_schema_format({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
         "response_format.json_schema.schema", "chain"),
        ({"type": "json_object", "schema": {}}, "response_format.schema", "Unrecognized"),
    ],
)
def test_bad_response_formats_are_refused_naming_the_parameter(value, param, words):
    with pytest.raises(LifecycleError) as caught:
        parse_response_format(value)
    assert caught.value.param == param
    assert words in caught.value.message


def test_recursive_schemas_within_the_limits_are_accepted():
    tree = {"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                               "required": ["children"], "additionalProperties": False}},
            "$ref": "#/$defs/node"}
    assert parse_response_format(json_schema_format(tree)).schema == tree
    assert parse_response_format(json_schema_format(nested(MAX_NESTING - 1))).type == "json_schema"


OPEN = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize(("schema", "context"), [
    (OPEN, "()"),
    ({"type": "array", "items": OPEN}, "('items',)"),
    ({"anyOf": [{"type": "string"}, OPEN]}, "('anyOf', 1)"),
    ({"$defs": {"thing": OPEN}, "$ref": "#/$defs/thing"}, "('$defs', 'thing')"),
    ({"type": "object", "properties": {"a": {"type": ["object", "null"]}}, "required": ["a"],
      "additionalProperties": False}, "('properties', 'a')"),
])
def test_strict_schemas_close_every_object_as_openai_requires(schema, context):
    with pytest.raises(LifecycleError) as caught:
        parse_response_format(json_schema_format(schema))
    assert caught.value.param == "response_format.json_schema.schema"
    assert f"In context={context}, 'additionalProperties' is required to be supplied and to be false." \
        in caught.value.message
    loose = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}  # strict defaults to false
    assert parse_response_format(loose).schema == schema


def test_unbounded_numbers_get_json_safe_bounds_and_explicit_bounds_are_kept():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": ["integer", "null"], "maximum": 5},
                                               "c": {"enum": [{"type": "integer"}]},
                                               "d": {"type": "number", "minimum": 0},
                                               "e": {"type": "number", "multipleOf": 0.5}}}
    safe = safe_integers(schema)
    assert safe["properties"]["d"] == {"type": "number", "minimum": 0, "maximum": SAFE_INTEGER, "multipleOf": NUMBER_STEP}
    assert safe["properties"]["e"]["multipleOf"] == 0.5
    assert safe["properties"]["a"] == {"type": "integer", "maximum": SAFE_INTEGER, "minimum": -SAFE_INTEGER}
    assert safe["properties"]["b"]["maximum"] == 5 and safe["properties"]["b"]["minimum"] == -SAFE_INTEGER
    assert safe["properties"]["c"] == {"enum": [{"type": "integer"}]}  # data inside enum is not a schema
    assert schema["properties"]["a"] == {"type": "integer"}  # the caller's schema is not changed


def _decode(loaded, ids):
    with loaded.tokenizer_lock:
        return loaded.tokenizer.decode(ids)


def test_the_mask_allows_exactly_the_tokens_that_keep_the_output_valid(loaded):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    constraint = json_constraint(loaded, schema)
    first = constraint.allowed()
    assert first.shape == (loaded.vocab_size,) and first.dtype == bool
    allowed_texts = {_decode(loaded, [int(i)]) for i in np.flatnonzero(first)}
    assert allowed_texts and all('{"ok": true}'.startswith(text) for text in allowed_texts)
    text = ""
    while not constraint.complete:
        mask = constraint.allowed()
        token = int(np.flatnonzero(mask)[0])
        constraint.accept(token)
        text += _decode(loaded, [token])
    assert json.loads(text) in ({"ok": True}, {"ok": False})
    with pytest.raises(LifecycleError):
        json_constraint(loaded, schema).accept(int(np.flatnonzero(~first)[0]))


def test_the_grammar_stage_removes_first_and_greedy_picks_the_best_allowed(logits):
    allowed = np.zeros(logits.size, dtype=bool)
    best = np.argsort(-logits)[:10]
    allowed[best[3:6]] = True
    for settings in (GREEDY, SamplingSettings(temperature=1.0, top_k=2)):
        sampled = apply_sampling(logits, settings, allowed=allowed)
        assert set(np.flatnonzero(sampled.removed_by == STAGES.index("grammar"))) == set(np.flatnonzero(~allowed))
        assert sampled.final_probs[~allowed].sum() == 0
        assert int(np.argmax(sampled.final_probs)) == best[3]
        assert np.isclose(sampled.base_probs.sum(), 1.0) and sampled.base_probs[best[0]] > sampled.base_probs[best[3]]
    with pytest.raises(LifecycleError):
        apply_sampling(logits, GREEDY, allowed=np.zeros(logits.size, dtype=bool))


def test_every_json_schema_answer_parses_and_validates(loaded):
    """The issue's target: 100% of json_schema responses validate (24 schema x prompt pairs). The requests go to
    the engine at once, as an API's clients send them: batched, each with its own grammar."""
    assert len(CASES) >= 20

    def answer(case: tuple[str, str]):
        name, prompt = case
        rules = output_rules(json_schema_format(SCHEMAS[name], name))
        prompt_ids = render_messages([{"role": "user", "content": prompt}]).ids
        return generate(loaded, prompt_ids, GREEDY, 160, constraint=rules.constraint(loaded))

    with ThreadPoolExecutor(CONCURRENT) as pool:
        results = list(pool.map(answer, CASES))
    failures, steps_seen = [], 0
    for (name, prompt), result in zip(CASES, results):
        steps_seen += len(result.steps)
        try:
            jsonschema.validate(json.loads(result.text), SCHEMAS[name])
        except (ValueError, jsonschema.ValidationError) as error:
            failures.append((name, prompt, result.finish_reason, result.text, str(error)[:80]))
        assert result.finish_reason == "stop" and all(s.grammar_allowed for s in result.steps)
    assert failures == []
    assert steps_seen > 10 * len(CASES)


def test_json_object_mode_answers_one_json_object(loaded):
    rules = output_rules({"type": "json_object"})
    prompt_ids = render_messages([{"role": "user", "content": "Return a JSON object about the weather."}]).ids
    result = generate(loaded, prompt_ids, GREEDY, 120, constraint=rules.constraint(loaded))
    assert result.finish_reason == "stop"
    assert isinstance(json.loads(result.text), dict)
    unconstrained = generate(loaded, prompt_ids, GREEDY, 20)
    assert not unconstrained.text.startswith("{")  # the grammar, not the model, made it JSON


def test_a_grammar_constraint_is_fresh_per_generation(loaded):
    grammar = json_grammar({"type": "boolean"})
    a, b = GrammarConstraint(loaded, grammar), GrammarConstraint(loaded, grammar)
    token = int(np.flatnonzero(a.allowed())[0])
    a.accept(token)
    assert np.array_equal(b.allowed(), GrammarConstraint(loaded, grammar).allowed())
