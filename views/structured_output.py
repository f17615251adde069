"""Structured output page: one tool call or json_schema answer followed through the grammar.

The sidebar's prompt is sent with tools (or a response_format) chosen here; the page shows what
the tool definitions cost in the prompt, how many tokens the grammar mask allowed at each step,
the stream deltas as OpenAI sends them (a tool call's arguments arriving in fragments), and the
final object validated against its schema. The run goes through lifecycle.features.structured.follow_call.
The mask's columns are drawn in the browser (ui.live_bars); the request's controls (under the mask), the stream's
table, the final object and the prompt come in the run after that picture is drawn (ui.when_idle), so a new tab does
not wait for their code: its first run follows the opening request, the example tools.
The agent loop that runs such calls round after round is on the Agents page (views/agent.py).
``prepare`` runs the page's opening request (the example tools) for a prompt outside any session (ui.warm_pages).
"""

import json

import pandas as pd
import streamlit as st

from charts.structured import mask_bars
from lifecycle.errors import LifecycleError
from lifecycle.lessons.structured_output import structured_lesson
from lifecycle.features.structured import StructuredRun, follow_call, stream_rows
from lifecycle.features.tools import output_rules
from lifecycle.stages.vocabulary import show_token
from ui.cache import per_prompt_cache
from lifecycle.model import LoadedModel
from ui.frame import lesson, loaded_model, show_text, stage_page, streamlit_page
from ui.live_bars import live_bars
from ui.tables import fitted_table
from ui.settings import JourneySettings
from ui.stages import stage
from ui.when_idle import details_ready, idle_told

MAX_TOKENS = 120
EXAMPLE_TOOLS = [
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search the encyclopedia and return the best matching passages.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 80}},
                       "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                        "unit": {"enum": ["celsius", "fahrenheit"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
]
EXAMPLE_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 160}, "confidence": {"type": "number", "minimum": 0,
                                                                                   "maximum": 1}},
    "required": ["answer", "confidence"], "additionalProperties": False,
}
CHOICES = ("required", "auto", "none")
OPENING = {"tools": EXAMPLE_TOOLS, "tool_choice": CHOICES[0]}  # the request the controls start at
SHOWN_FRAGMENTS = 60
DETAILS = "structured_details"  # ui.when_idle: the controls, the stream's table and the final object follow the mask


@per_prompt_cache
def _run(messages_json: str, fields_json: str, settings: JourneySettings, _loaded) -> StructuredRun:
    rules = output_rules(**json.loads(fields_json))
    return follow_call(_loaded, json.loads(messages_json), rules, settings.sampling, MAX_TOKENS)


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """What this page computes for ``settings`` as it opens (a tool call, the example tools), into the shared cache."""
    _run(json.dumps(settings.messages()), json.dumps(OPENING, sort_keys=True), settings, loaded)


def _parse_json(text: str, what: str, param: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise LifecycleError(f"The {what} is not valid JSON: {error.msg} (line {error.lineno}).", param) from None


def _request_fields() -> dict:
    mode = st.segmented_control("Ask for", ["A tool call", "JSON matching a schema"], default="A tool call",
                                key="structured_mode") or "A tool call"
    if mode == "A tool call":
        tools_text = st.text_area("tools", json.dumps(EXAMPLE_TOOLS, indent=1), height=200, key="structured_tools")
        names = [t.get("function", {}).get("name") for t in EXAMPLE_TOOLS]
        choice = st.selectbox("tool_choice", [*CHOICES, *[f"function: {n}" for n in names]], key="structured_choice")
        tool_choice = ({"type": "function", "function": {"name": choice.split(": ", 1)[1]}}
                       if choice.startswith("function: ") else choice)
        return {"tools": _parse_json(tools_text, "tools list", "tools"), "tool_choice": tool_choice}
    schema_text = st.text_area("response_format.json_schema.schema", json.dumps(EXAMPLE_SCHEMA, indent=1), height=200,
                               key="structured_schema")
    schema = _parse_json(schema_text, "schema", "response_format")
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}}


def _lesson(run: StructuredRun) -> None:
    overruled = sum(not step.model_choice_allowed for step in run.steps)
    lesson(structured_lesson(run.tool_tokens, run.schema_tokens, [s.allowed for s in run.steps], overruled,
                             run.vocabulary, run.finish_reason))


def _fragments(run: StructuredRun) -> None:
    st.subheader("What the stream sends", anchor=False)
    rows = stream_rows(run.steps)
    held = "arguments so far" if any("tool_calls" in row.delta for row in rows) else "content so far"
    table = pd.DataFrame([{"step": row.step, "token": show_token(row.token),
                           "chunk delta": json.dumps(row.delta, ensure_ascii=False), held: row.so_far}
                          for row in rows[:SHOWN_FRAGMENTS]], columns=["step", "token", "chunk delta", held])
    fitted_table(table, ["step", "token", held], key="structured_fragments", full_from=640, hide_index=True,
                 narrow_widths={"step": 45, "token": 100, held: 190})
    if run.tool_calls:
        st.caption("The first tool-call delta carries the call's id, type, name and empty arguments; every later "
                   "one only an arguments fragment with the call's index. The client glues the fragments together "
                   "and can parse the arguments only once the call has finished.")
    if len(rows) > SHOWN_FRAGMENTS:
        st.caption(f"First {SHOWN_FRAGMENTS} of {len(rows)} deltas.")


def _result(run: StructuredRun) -> None:
    st.subheader("The final object", anchor=False)
    if run.tool_calls:
        st.json({"finish_reason": run.finish_reason, "message": {"role": "assistant", "content": None,
                                                                  "tool_calls": run.tool_calls}})
    if run.valid:
        st.success("The answer parses as JSON and validates against its schema (checked with jsonschema).",
                   icon=":material/check_circle:")
        st.json(run.value)
    else:
        st.warning(f"Not a validated object: {run.problem}", icon=":material/warning:")
        show_text(run.text)


def render() -> None:
    with stage_page("structured-output") as settings:
        ready = idle_told(DETAILS)
        picture = st.container()  # the lesson and the mask first, the request's controls under them
        if ready:
            with st.expander("The request: tools and tool_choice, or a JSON schema", icon=":material/build:"):
                fields = _request_fields()
        else:
            fields = OPENING
        output_rules(**fields)  # bad tools, schema or tool_choice: the API's own message, before any model work
        loaded = loaded_model()
        with picture:
            with st.spinner("Generating under the grammar…", show_time=True):
                run = _run(json.dumps(settings.messages()), json.dumps(fields, sort_keys=True), settings, loaded)
            _lesson(run)
            live_bars(mask_bars([s.token for s in run.steps], [s.allowed for s in run.steps],
                                [not s.model_choice_allowed for s in run.steps], run.vocabulary), key="structured_mask")
            st.caption("Green: the model's own most likely token was allowed. Orange: the mask removed it and the token "
                       f"was drawn from what the grammar allowed. A column of 1 is a forced token; the dashed line is "
                       f"the whole vocabulary ({run.vocabulary:,} tokens).")
        if not details_ready(DETAILS):
            return
        _fragments(run)
        _result(run)
        with st.expander("The prompt the model read"):
            show_text(run.prompt.text, limit=8_000)
        st.page_link(streamlit_page(stage("agent")), label="The agent loop that runs these calls, and its attack surface",
                     icon=stage("agent").icon)
