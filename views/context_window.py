"""Context window page: the chat template around the messages and the token budget of the context window.

The budgets are drawn in the browser (ui.live_bars): the page holds no Plotly chart. Its first run draws the budget
alone; the window choice, the tool and document boxes, the table, the template's code block and the overflow demo
come in the page's next run, once the budget is drawn (ui.when_idle): the browser loads the code of every kind of
element in a run (the syntax highlighter, the table, each widget) before it draws anything of that run.
"""

import json

import pandas as pd
import streamlit as st

from charts.context_window import BUDGET_PARTS, PART_LABELS, budget_bars
from lifecycle.stages.context_window import (
    CONTEXT_WINDOWS,
    Conversation,
    RenderedPrompt,
    context_budget,
    render_prompt,
    truncate_oldest_turns,
)
from lifecycle.errors import LifecycleError
from lifecycle.lessons.context_window import budget_lesson, overflow_demo_sentence, truncation_lesson, window_sentence
from ui.frame import lesson, loaded_model, stage_page
from ui.live_bars import live_bars
from ui.when_idle import details_ready, idle_told

DETAILS = "context_window_details"  # ui.when_idle: the controls, the table, the template and the demo follow the budget
MAX_TEMPLATE_CHARS = 6_000
WINDOW_LABELS = {
    "8k": "8k preset (8,192)",
    "32k": "32k preset (32,768)",
    "128k": "128k preset (128,000)",
}
EXAMPLE_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "name": "search_docs",
        "description": "Search the company handbook and return the best matching passages.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}}},
    },
]
EXAMPLE_TOOLS_TEXT = json.dumps(EXAMPLE_TOOLS, indent=1)
EXAMPLE_DOCUMENTS = (
    "Rayleigh scattering: air molecules scatter short (blue) wavelengths of sunlight much more strongly "
    "than long (red) ones, so light reaching us from all over the sky is mostly blue.\n---\n"
    "At sunrise and sunset sunlight crosses far more air, most blue light is scattered away before it "
    "reaches us, and the sky near the sun looks orange and red."
)
EXAMPLE_HISTORY = [
    {"role": "user", "content": "Hi! Can you help me plan a weekend trip to Lisbon in early May?"},
    {"role": "assistant", "content": "Of course. Day one: the Alfama quarter, São Jorge castle and a fado evening. "
                                     "Day two: Belém with its tower and monastery, then a walk along the river."},
    {"role": "user", "content": "What should I eat there, and what does a dinner cost?"},
    {"role": "assistant", "content": "Try pastéis de nata, grilled sardines, bacalhau and a bifana sandwich. "
                                     "A simple dinner with wine is about 20 to 30 euros a person."},
    {"role": "user", "content": "And how do I get from the airport to the centre?"},
    {"role": "assistant", "content": "The red metro line reaches the centre in about 25 minutes for under "
                                     "two euros; a taxi takes 15 to 20 minutes and costs around 15 euros."},
    {"role": "user", "content": "Is one weekend enough, or should I add a day trip?"},
    {"role": "assistant", "content": "Add Sintra if you can: its palaces and gardens are 40 minutes away by train."},
]


def conversation(settings, tools=(), documents=(), history=None) -> Conversation:
    """The conversation the sidebar settings send (the same messages as settings.messages())."""
    turns = [{"role": role, "content": content} for role, content in settings.history]
    return Conversation(
        new_message=settings.prompt,
        system=settings.system_prompt if settings.system_prompt.strip() else None,
        history=turns if history is None else history,
        tools=list(tools),
        documents=list(documents),
    )


def _extras_as_they_stand() -> tuple[str, str]:
    """The tool descriptions and documents boxes' text: the visitor's, or the examples they open with."""
    return (st.session_state.get("context_tools", EXAMPLE_TOOLS_TEXT),
            st.session_state.get("context_documents", EXAMPLE_DOCUMENTS))


def parse_tools(text: str) -> list[dict]:
    try:
        tools = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as error:
        raise LifecycleError(f"The tool descriptions are not valid JSON: {error.msg} (line {error.lineno}).",
                             param="tools") from None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise LifecycleError("The tool descriptions must be a JSON list of objects.", param="tools")
    return tools


def segment_table(rows: list[tuple[str, RenderedPrompt]]) -> pd.DataFrame:
    present = {s.name for _, prompt in rows for s in prompt.segments}
    names = [part for part in BUDGET_PARTS if part in present]
    table = pd.DataFrame({"part": [PART_LABELS.get(name, name) for name in names]})
    for label, prompt in rows:
        tokens = {s.name: s.tokens for s in prompt.segments}
        table[f"{label} (tokens)"] = [tokens.get(name, 0) for name in names]
    return table


def show_template(prompt: RenderedPrompt) -> None:
    text = prompt.text
    if len(text) > MAX_TEMPLATE_CHARS:
        text = f"{text[:MAX_TEMPLATE_CHARS]}\n… ({len(prompt.text) - MAX_TEMPLATE_CHARS:,} more characters not shown)"
    st.code(text, language=None, wrap_lines=True)


@st.fragment
def overflow_demo(settings) -> None:
    """Truncation in a small window the visitor picks. A st.fragment: its two controls rerun this part alone."""
    st.subheader("Overflow: what truncation drops", anchor=False)
    left, right = st.columns(2)
    with left:
        window = st.number_input("Small window for the demo (tokens)", 16, loaded_model().context_window, 256, 16,
                                 key="overflow_window")
    with right:
        example = st.checkbox("Use an example 8-message history", value=not settings.history, key="overflow_example",
                              help="Your own earlier turns (sidebar) are used when this is off.")
    history = EXAMPLE_HISTORY if example else None
    full = conversation(settings, history=history)
    before = context_budget(render_prompt(full), window, settings.max_tokens)
    st.caption(
        f"{len(full.history)} history messages; the prompt needs {before.prompt_tokens:,} tokens plus "
        f"{settings.max_tokens:,} reserved for the answer (max_tokens) in a {window:,}-token window. "
        + overflow_demo_sentence(window, loaded_model().context_window, len(EXAMPLE_HISTORY) if example else None,
                                 len(settings.history))
    )
    if before.fits:
        st.info(f"It fits with {before.free:,} tokens to spare: lower the window or add history to see truncation.")
        return
    try:
        cut = truncate_oldest_turns(full, window, settings.max_tokens)
    except LifecycleError as error:
        st.warning(f"{error.message} An API would answer 400 context_length_exceeded here.")
        live_bars(budget_bars([("before", before)]), key="context_overflow")
        return
    lesson(truncation_lesson(window, before.overflow, cut.strategy, len(cut.dropped), len(full.history),
                             cut.budget.prompt_tokens, cut.budget.free))
    live_bars(budget_bars([("before", before), ("after truncation", cut.budget)]), key="context_overflow")
    st.markdown("**Dropped messages** (oldest first)")
    st.table(pd.DataFrame(cut.dropped, columns=["role", "content"]))
    st.markdown("**Kept history**")
    st.table(pd.DataFrame(cut.conversation.history, columns=["role", "content"]))


def render() -> None:
    with stage_page("context-window") as settings:
        model = loaded_model()
        run_prompt = render_prompt(conversation(settings))
        run_budget = context_budget(run_prompt, model.context_window, settings.max_tokens)
        message_tokens = next(s.tokens for s in run_prompt.segments if s.name == "new message")
        lesson(budget_lesson(model.name, run_prompt, run_budget, message_tokens))
        ready = idle_told(DETAILS)
        budget_and_template(settings, run_prompt, ready)
        if details_ready(DETAILS):
            overflow_demo(settings)


@st.fragment
def budget_and_template(settings, run_prompt: RenderedPrompt, ready: bool) -> None:
    """The budget in the chosen window, with the tools and documents the visitor adds, then the template the model
    reads. A st.fragment: the window choice and the two text boxes rerun this part alone, not the page. Until the
    page is ``ready`` for its details, the budget is drawn alone, for the window and boxes as they stand."""
    model = loaded_model()
    st.subheader("The budget", anchor=False)
    chart_box = st.container()  # the chart first, its controls under it
    windows = {"model": model.context_window, **CONTEXT_WINDOWS}
    labels = {"model": f"The model's own ({model.context_window:,})", **WINDOW_LABELS}
    tools_text, documents_text = _extras_as_they_stand()
    if ready:
        st.radio("Window", list(labels), format_func=labels.get, horizontal=True, key="context_window")
    window = windows[st.session_state.get("context_window", "model")]
    st.caption(
        f"{window_sentence(model.name, model.context_window)}; "
        "the 32k and 128k presets only show how the same request would fill a larger hosted model's window."
    )
    if ready:
        with st.expander("Add tool descriptions and retrieved documents to see their cost"):
            left, right = st.columns(2)
            with left:
                tools_text = st.text_area("Tool descriptions (JSON list)", EXAMPLE_TOOLS_TEXT, height=220,
                                          key="context_tools")
            with right:
                documents_text = st.text_area("Retrieved documents (separate with a line of ---)", EXAMPLE_DOCUMENTS,
                                              height=220, key="context_documents")
    rows = [("this run", run_prompt)]
    try:
        tools = parse_tools(tools_text)
    except LifecycleError as error:
        st.warning(error.message)
        tools = []
    documents = [doc.strip() for doc in documents_text.split("\n---\n") if doc.strip()]
    if tools or documents:
        label = f"with {len(tools)} tools, {len(documents)} documents"
        rows.append((label, render_prompt(conversation(settings, tools, documents))))
    budgets = [(label, context_budget(prompt, window, settings.max_tokens)) for label, prompt in rows]
    with chart_box:
        live_bars(budget_bars(budgets), key="context_budget")
        if len(rows) > 1:
            extra = budgets[1][1].prompt_tokens - budgets[0][1].prompt_tokens
            st.markdown(f"The tools and documents cost **{extra:,} more tokens** on every call that carries them.")
    if not ready:
        return
    st.table(segment_table(rows).set_index("part"))

    st.subheader("The rendered chat template", anchor=False)
    st.caption(
        f"What the model reads for this run, as text: {len(run_prompt.special_positions)} special tokens "
        "(<|im_start|> and <|im_end|>) frame each message with its role."
    )
    show_template(run_prompt)
    if len(rows) > 1:
        with st.expander("The template with the tools and documents"):
            show_template(rows[1][1])
