"""The structured-output test set: JSON schemas a client might send, each with prompts.

Shared by the real-model tests (every answer must parse and validate) and ``make bench``.
"""

from __future__ import annotations

STRICT = {"additionalProperties": False}


def obj(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or list(properties), **STRICT}


SCHEMAS: dict[str, dict] = {
    "person": obj({"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 130}}),
    "city": obj({"name": {"type": "string"}, "country": {"type": "string"}, "population": {"type": "integer"}}),
    "sentiment": obj({"sentiment": {"enum": ["positive", "negative", "neutral"]},
                      "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
    "weather": obj({"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
                    "temperature": {"type": "integer", "minimum": -60, "maximum": 60}}),
    "tags": obj({"tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 4}}),
    "flags": obj({"is_question": {"type": "boolean"}, "is_polite": {"type": "boolean"}}),
    "address": obj({"street": {"type": "string", "maxLength": 60},
                    "city": {"type": "string", "maxLength": 40},
                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}),
    "nested": obj({"book": obj({"title": {"type": "string", "maxLength": 60}, "year": {"type": "integer"}}),
                   "author": obj({"name": {"type": "string", "maxLength": 40}})}),
    "nullable": obj({"nickname": {"type": ["string", "null"], "maxLength": 30}, "score": {"type": "integer"}}),
    "any_of": obj({"answer": {"anyOf": [{"type": "integer"}, {"enum": ["unknown"]}]}}),
    "defs": {"$defs": {"point": obj({"x": {"type": "integer"}, "y": {"type": "integer"}})},
             **obj({"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}})},
    "recipe": obj({"dish": {"type": "string", "maxLength": 40},
                   "steps": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 3}}),
}

PROMPTS = {
    "person": ["Invent a person.", "Who wrote Hamlet and how old did he get?"],
    "city": ["Tell me about Paris.", "Describe the biggest city in Japan."],
    "sentiment": ["Classify: 'I love this phone!'", "Classify: 'The train was late again.'"],
    "weather": ["Weather report for Oslo.", "How hot is it in Cairo?"],
    "tags": ["Tag this post: 'Ten easy pasta recipes for busy weeknights'.", "Give tags for a video about cats."],
    "flags": ["Can you please pass the salt?", "Go away."],
    "address": ["Write a made-up US address.", "Where is the White House?"],
    "nested": ["A famous novel and its author.", "Name a book by Jane Austen."],
    "nullable": ["Rate the movie Up out of 10.", "A user named Sam scored 7."],
    "any_of": ["How many moons does Mars have?", "What number am I thinking of?"],
    "defs": ["A line from the origin to (3, 4).", "Two points on a grid."],
    "recipe": ["How do I boil an egg?", "Steps to make tea."],
}

CASES = [(name, prompt) for name, prompts in PROMPTS.items() for prompt in prompts]
