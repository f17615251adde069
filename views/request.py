"""Request page: the JSON request built from the settings, the raw HTTP request, client snippets and the response.

The JSON body is the picture, drawn without Streamlit's syntax highlighter (ui.live_code); every code block
comes in the run the browser asks for once the body is drawn (ui.when_idle), so a new tab does not wait for it.
"""

import json

import pandas as pd
import streamlit as st

from charts.request import resent_tokens_chart
from lifecycle.stages.context_window import NEW_MESSAGE, render_messages
from lifecycle.journey import journey_request
from lifecycle.lessons.request import request_lesson
from lifecycle.errors import LifecycleError
from lifecycle.stages.request import EXTENSIONS
from lifecycle.api.outbound import DEADLINE_SECONDS, send_chat_completion
from lifecycle.api.responses_request import as_responses_request, wire_differences
from lifecycle.api.snippets import python_call, render_curl, render_javascript, render_python
from lifecycle.api.statelessness import resend_sizes
from lifecycle.api.wire import render_http_request, render_http_response
from lifecycle.stages.streaming import delta_content, frame_kind
from ui.cache import answered_prompt, per_prompt_cache
from ui.deployment import outbound_policy
from ui.frame import lesson, own_api_base, show_text, stage_page
from ui.tables import fitted_table
from ui.live_code import live_code
from ui.text import literal, ms
from ui.when_idle import DETAILS_PENDING, when_idle

BODY = "request_body"  # the JSON body's component (ui.live_code)
DETAILS = "request_details"  # ui.when_idle: the code blocks and the tabs under them come once the body is drawn
MAX_FOLLOW_UPS = 10
RESENT_CHART = "resent_chart_open"  # the chart's expander: its figure is built only while open
MAX_FRAMES_SHOWN = 400
FRAME_CHARS = 400
FOLLOW_UPS = pd.DataFrame(
    {
        "user": ["Can you say that in simpler words?", "Give one everyday example."],
        "assistant": ["", ""],
    }
)


@per_prompt_cache
def _prompt_tokens(messages_json: str) -> tuple[int, int]:
    """(all prompt tokens, tokens of the new message) of one turn's messages, through the chat template."""
    rendered = render_messages(json.loads(messages_json))
    new = sum(segment.tokens for segment in rendered.segments if segment.name == NEW_MESSAGE)
    return len(rendered.ids), new


def _history_pairs(history) -> list[tuple[str, str]] | None:
    """Earlier turns as (user, assistant) pairs, or None when they do not alternate that way."""
    roles = [role for role, _ in history]
    if len(roles) % 2 or roles != ["user", "assistant"] * (len(roles) // 2):
        return None
    return [(history[i][1], history[i + 1][1]) for i in range(0, len(history), 2)]


def _follow_ups(edited: pd.DataFrame) -> list[tuple[str, str]]:
    rows = []
    for user, assistant in zip(edited["user"], edited["assistant"]):
        user = user if isinstance(user, str) else ""
        if user.strip():
            rows.append((user, assistant if isinstance(assistant, str) else ""))
    return rows[:MAX_FOLLOW_UPS]


def _show_request_views(request, ready: bool) -> None:
    """The body, drawn without the syntax highlighter (the picture); the wire and the snippets once ``ready``."""
    tabs = st.tabs(["JSON body", "Raw HTTP", "curl", "Python (openai)", "JavaScript (openai)"])
    with tabs[0]:
        live_code(json.dumps(request.to_payload(), ensure_ascii=False, indent=2), key=BODY, label="The JSON body")
    with tabs[1]:
        st.caption("What goes over the socket (the key is never shown; the wire uses CRLF line ends).")
    snippets = ((tabs[1], render_http_request, "http"), (tabs[2], render_curl, "bash"),
                (tabs[3], render_python, "python"), (tabs[4], render_javascript, "javascript"))
    for tab, render_snippet, language in snippets:
        with tab:
            if ready:
                st.code(render_snippet(request, own_api_base()), language=language)
            else:
                st.caption(DETAILS_PENDING)
    st.caption(
        "The request your code sends, built live from the sidebar settings: change a slider and the JSON changes. "
        "`top_k`, `min_p` and `repetition_penalty` are extensions of this app (and of vLLM or llama.cpp), "
        "not OpenAI parameters: the Python snippet sends them in `extra_body`."
    )


def _show_both_endpoints(request) -> None:
    st.subheader("The same call through the Responses API", anchor=False)
    responses = as_responses_request(request)
    differences = wire_differences(request, responses)
    size = next(d for d in differences if d.aspect == "body size")
    st.markdown(
        f"OpenAI's newer endpoint, `POST /v1/responses`, asks the model the same thing in other words; this "
        f"server answers both, through the same stages. Here this request takes {size.chat_completions} as a "
        f"chat completion and {size.responses} as a Responses call. The big difference is state: with "
        "`previous_response_id` the server keeps the conversation, so the next turn sends only its new message."
    )
    st.caption("The call with the openai Python SDK (same client, same key), then how the answer is read:")
    left, right = st.columns(2)
    with left:
        st.caption("chat completions")
        st.code(python_call(request), language="python", wrap_lines=True)
    with right:
        st.caption("Responses")
        st.code(python_call(responses), language="python", wrap_lines=True)
    # A static table: its sentences wrap inside the cells, so all three columns fit any screen.
    st.table(
        pd.DataFrame(
            {
                "": [d.aspect for d in differences],
                "chat completions": [d.chat_completions for d in differences],
                "Responses": [d.responses for d in differences],
            }
        ).set_index("")
    )
    with st.expander("Both bodies as JSON"):
        left, right = st.columns(2)
        left.code(json.dumps(request.to_payload(), ensure_ascii=False, indent=2), language="json", wrap_lines=True)
        right.code(json.dumps(responses.to_payload(), ensure_ascii=False, indent=2), language="json",
                   wrap_lines=True)


def _show_response(answer) -> None:
    response = answer.response
    st.subheader("The response after the run", anchor=False)
    usage = response["usage"]
    columns = st.columns(4)
    columns[0].metric("finish_reason", response["choices"][0]["finish_reason"])
    columns[1].metric("prompt_tokens", f"{usage['prompt_tokens']:,}")
    columns[2].metric("completion_tokens", f"{usage['completion_tokens']:,}")
    columns[3].metric("total_tokens", f"{usage['total_tokens']:,}")
    st.caption("The chat.completion object a non-streamed call returns (id and created come from this run):")
    st.code(json.dumps(response, ensure_ascii=False, indent=2), language="json")


def _show_statelessness(settings, prepared, answer) -> None:
    st.subheader("Statelessness: every turn sends everything again", anchor=False)
    st.markdown(
        "The API remembers nothing between calls. To continue a conversation the client sends the whole "
        "history again, and the model reads all of it again. Turn 1 below is this run: your prompt and "
        "the model's real answer. Add follow-up messages (the assistant replies are whatever you type: "
        "the model is not rerun here) and watch each request grow."
    )
    pairs = _history_pairs(settings.history)
    if pairs is None:
        st.info("The sidebar's earlier turns do not alternate user/assistant, so they are left out here.")
        pairs = []
    edited = st.data_editor(
        FOLLOW_UPS,
        num_rows="dynamic",
        key="follow_ups",
        hide_index=True,
        column_config={
            # Widths that fit a phone; a cell opens to its whole text for editing.
            "user": st.column_config.TextColumn("Your next message", width=160),
            "assistant": st.column_config.TextColumn("Assistant reply (you type it)", width=150),
        },
    )
    turns = pairs + [(settings.prompt, answer.generation.text)] + _follow_ups(edited)
    system = settings.system_prompt.strip() or None
    sized = resend_sizes(turns, system=system, model=prepared.request.model)
    counts = [_prompt_tokens(json.dumps(turn.messages, ensure_ascii=False)) for turn in sized]
    totals, news = [total for total, _ in counts], [new for _, new in counts]
    table = pd.DataFrame(
        {
            "turn": [turn.turn for turn in sized],
            "messages sent": [len(turn.messages) for turn in sized],
            "prompt tokens": totals,
            "new message tokens": news,
            "tokens sent again": [total - new for total, new in zip(totals, news)],
            "JSON body (bytes)": [turn.payload_bytes for turn in sized],
        }
    )
    fitted_table(table, {"turn": "turn", "prompt tokens": "prompt tokens", "tokens sent again": "sent again",
                         "JSON body (bytes)": "bytes"}, key="resent_table", full_from=650, hide_index=True,
                 narrow_widths={"turn": 50, "prompt tokens": 100, "sent again": 90, "bytes": 80})
    st.caption(
        "Tokens: each turn's messages through the model's chat template (its default system prompt "
        "included). Bytes: the compact JSON body of a plain request (model, messages, temperature, top_p, "
        "max_tokens, stream), so turn 1 is smaller than the request above, which carries all your settings."
    )
    # The only Plotly figure of the page, drawn once asked for: a Plotly chart anywhere on a page, even in a
    # tab not shown, makes a new tab load and run plotly.js (~1 s of the browser's CPU) before it draws.
    chart = st.expander("Tokens sent per turn, as a chart", icon=":material/bar_chart:", key=RESENT_CHART,
                        on_change="rerun")
    if chart.open:
        with chart:
            st.plotly_chart(resent_tokens_chart(totals, news, [turn.payload_bytes for turn in sized]),
                            key="resent_chart", theme=None)
    with st.expander(f"The messages of turn {sized[-1].turn}, the last request"):
        st.code(json.dumps(sized[-1].messages, ensure_ascii=False, indent=2), language="json")


def _remote_form(request) -> None:
    st.subheader("Send it for real", anchor=False)
    policy = outbound_policy()
    where = ("public internet hosts, and loopback or private addresses this server's operator allows"
             if policy.allowed else "public internet hosts only (this server's operator allows no private address)")
    st.markdown(
        "Send this request to an OpenAI-compatible server (this app's own `/v1`, OpenAI, vLLM, llama.cpp, "
        "Ollama…) and see the exchange raw. Your key stays in this browser session's memory: it is sent "
        "only in the `Authorization` header and is never logged, stored or put in the URL."
    )
    st.caption(f"This server makes the request, so it goes to {where}; never to link-local or cloud metadata "
               f"addresses. Redirects are not followed; the exchange is cut off after {DEADLINE_SECONDS:g} s.")
    with st.form("remote"):
        base_url = st.text_input("Base URL", own_api_base(), key="remote_base_url",
                                 help="Starts as this app's own API, at the address your browser uses for it.")
        model = st.text_input("Model", request.model, key="remote_model")
        api_key = st.text_input("API key", type="password", key="remote_api_key", autocomplete="off")
        stream = st.checkbox("Stream the answer (server-sent events)", True, key="remote_stream")
        standard = st.checkbox(
            "Leave out this app's extensions (top_k, min_p, repetition_penalty): OpenAI refuses them",
            False, key="remote_standard",
        )
        sent = st.form_submit_button("Send", icon=":material/send:", key="remote_send")
    if sent:
        payload = _request_payload(request, model, stream, standard)
        st.session_state.pop("remote_exchange", None)
        try:
            with st.spinner("Waiting for the server…", show_time=True):
                st.session_state["remote_exchange"] = send_chat_completion(base_url, payload, api_key or None, policy)
        except LifecycleError as refused:
            st.error(literal(refused.message), icon=":material/block:")
    exchange = st.session_state.get("remote_exchange")
    if exchange is not None:
        _show_exchange(exchange)


def _request_payload(request, model: str, stream: bool, standard: bool) -> dict:
    payload = {**request.to_payload(), "model": model.strip(), "stream": stream}
    payload.pop("stream_options", None)
    if stream and request.include_usage:
        payload["stream_options"] = {"include_usage": True}
    if standard:
        for name in EXTENSIONS:
            payload.pop(name, None)
    return payload


def _show_exchange(exchange) -> None:
    if exchange.error:
        st.error(literal(f"No HTTP answer from {exchange.url} ({exchange.address}): {exchange.error}"),
                 icon=":material/cloud_off:")
        return
    columns = st.columns(4)
    columns[0].metric("HTTP status", exchange.status)
    columns[1].metric("Total time", ms(exchange.seconds))
    columns[2].metric("Time to first token", ms(exchange.ttft))
    columns[3].metric("SSE frames", len(exchange.frames))
    if exchange.stopped:
        st.warning(literal(exchange.stopped), icon=":material/content_cut:")
    request_text = "\n".join(
        [f"POST {exchange.url}"] + [f"{name}: {value}" for name, value in exchange.request_headers.items()]
        + ["", json.dumps(exchange.request_body, ensure_ascii=False, indent=2)]
    )
    st.caption(f"Sent (to the checked address {exchange.address}):")
    st.code(request_text, language="http")
    st.caption("Received (status line and headers, then the body):")
    body = "" if exchange.streamed else exchange.body
    st.code(render_http_response(exchange.status, exchange.response_headers, body), language="http", wrap_lines=True)
    if exchange.streamed:
        frames = exchange.frames[:MAX_FRAMES_SHOWN]
        if len(exchange.frames) > len(frames):
            st.caption(f"The first {len(frames)} of {len(exchange.frames)} frames:")
        times = [frame.at for frame in frames]
        st.dataframe(
            pd.DataFrame(
                {
                    "arrived (ms)": [round(at * 1000, 1) for at in times],
                    "gap (ms)": [round((at - before) * 1000, 1) for before, at in zip([0.0] + times, times)],
                    "kind": [frame_kind(frame.raw) for frame in frames],
                    "content": [delta_content(frame.data) for frame in frames],
                    "frame as received": [frame.raw[:FRAME_CHARS] for frame in frames],
                }
            ),
            hide_index=True,
            key="remote_frames",
        )
    if exchange.text:
        st.caption("The answer's text:")
        show_text(exchange.text, limit=4000)


def render() -> None:
    with stage_page("request") as settings:
        request = journey_request(settings.journey_input())
        body_bytes = len(request.wire_body())
        intro = st.container()  # the lesson quotes the answer, which is generated after the request is shown
        ready = when_idle(DETAILS, after_ms=0)  # the browser has drawn the body: the code blocks may come
        _show_request_views(request, ready)
        prepared, answer = answered_prompt(settings)
        usage = answer.response["usage"]
        with intro:
            parameters = len(request.to_payload()) - 2  # every field but model and messages
            lesson(request_lesson(body_bytes, len(request.messages), parameters, usage["prompt_tokens"],
                                  usage["completion_tokens"], answer.response["choices"][0]["finish_reason"]))
        if not ready:
            st.caption(DETAILS_PENDING)
            return
        responses, response, stateless, remote = st.tabs(["The Responses API", "The response", "Every turn sends it all",
                                                          "Send it for real"])
        with responses:
            _show_both_endpoints(request)
        with response:
            _show_response(answer)
        with stateless:
            _show_statelessness(settings, prepared, answer)
        with remote:
            _remote_form(request)
