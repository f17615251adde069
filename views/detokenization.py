"""Detokenization and response page: token ids back to bytes and text, and the final response object.

The journey's generated ids are pushed one by one through ``lifecycle.stages.detokenization``; a button runs
the same on the model's own ids for a text with emoji, whose characters span several tokens, so
held-back incomplete UTF-8 is visible even when this run's answer has none. The answer's columns are drawn in
the browser (ui.live_bars); the tables, the example, the raw text and the response object come in the run after
that picture is drawn (ui.when_idle), so a new tab does not wait for their code.
"""

import pandas as pd
import streamlit as st

from charts.detokenization import bytes_bars
from lifecycle.stages.detokenization import DetokenizedStep, detokenize
from lifecycle.lessons.detokenization import detokenized_sentence
from lifecycle.stages.vocabulary import show_token
from lifecycle.stages.streaming import assemble
from lifecycle.stages.tokenization import encode_plain
from ui.cache import answered_prompt
from ui.frame import lesson, loaded_model, stage_page
from ui.live_bars import live_bars
from ui.tables import fitted_table
from ui.text import safe_markdown
from ui.when_idle import details_ready

SPLIT_EXAMPLE = "I love 🦀 and 🍣"
EXAMPLE = "detokenization_example"  # session state: the split-character example is open
MAX_EXAMPLE_CHARS = 200
TABLE_ROWS = 300
CHART_TOKENS = 60
DETAILS = "detokenization_details"  # ui.when_idle: everything under the answer's columns comes once they are drawn


def _hex(data: bytes) -> str:
    return data.hex(" ") if data else ""


def _table(steps: list[DetokenizedStep]) -> pd.DataFrame:
    shown = steps[:TABLE_ROWS]
    return pd.DataFrame({
        "Step": range(1, len(shown) + 1),
        "Id": [s.token_id for s in shown],
        "Bytes (hex)": [_hex(s.bytes) for s in shown],
        "Token alone": [show_token(s.bytes) for s in shown],
        "Decoded alone (naive)": [s.bytes.decode("utf-8", errors="replace") for s in shown],
        "Emitted": [("(special: not content)" if s.special else show_token(s.emitted)) for s in shown],
        "Held back (hex)": [_hex(s.held) for s in shown],
        "Code points emitted": [" ".join(f"U+{ord(c):04X}" for c in s.emitted if not c.isascii()) for s in shown],
    })


def _chart(steps: list[DetokenizedStep], key: str) -> None:
    shown = steps[:CHART_TOKENS]
    labels = [f"{i + 1}: {show_token(s.bytes)}" for i, s in enumerate(shown)]
    live_bars(bytes_bars(labels, [len(s.bytes) for s in shown], [len(s.held) for s in shown]), key=key)
    if len(steps) > CHART_TOKENS:
        st.caption(f"The chart shows the first {CHART_TOKENS} of {len(steps)} tokens.")


def _steps_view(steps: list[DetokenizedStep], key: str) -> None:
    _chart(steps, key)
    _steps_table(steps, key)


def _steps_table(steps: list[DetokenizedStep], key: str) -> None:
    fitted_table(_table(steps), ["Step", "Id", "Bytes (hex)", "Emitted"], key=f"{key}_bytes", full_from=840,
                 hide_index=True, narrow_widths={"Step": 45, "Id": 65, "Bytes (hex)": 110, "Emitted": 120})
    if len(steps) > TABLE_ROWS:
        st.caption(f"The first {TABLE_ROWS} of {len(steps)} tokens are listed.")


def _lesson(answer) -> None:
    steps = answer.detokenized
    lesson(detokenized_sentence(
        len(steps), sum(len(s.bytes) for s in steps if not s.special), sum(1 for s in steps if s.held),
        len(steps[-1].held) if steps else 0, sum(1 for s in steps if s.special), len(answer.generation.text),
        answer.generation.finish_reason, answer.response["usage"],
    ))


def _open_example() -> None:
    st.session_state[EXAMPLE] = True


def _split_example(loaded) -> None:
    st.subheader("A character split across tokens", anchor=False)
    if not st.session_state.get(EXAMPLE):
        st.button("Show a split-character example", on_click=_open_example, icon=":material/call_split:")
        return
    text = st.text_input("Example text", SPLIT_EXAMPLE, max_chars=MAX_EXAMPLE_CHARS, key="detokenization_text")
    if not text:
        st.info("Type some text to detokenize.")
        return
    ids = encode_plain(text)
    steps = detokenize(ids, loaded)
    split = sum(1 for s in steps if s.held)
    st.markdown(
        f"The model's tokenizer cuts this text into **{len(ids):,} tokens**; **{split:,}** of them end inside a "
        "character. Decoded alone, such a token is invalid UTF-8 (the naive column shows the replacement "
        "character �, while *Token alone* writes each stray byte in hex, like `<0xF0>`); the detokenizer holds its bytes back and emits the character once it is complete."
        if split else
        f"The model's tokenizer cuts this text into **{len(ids):,} tokens**, none of which splits a character. "
        "Try an emoji or a rare CJK character."
    )
    _steps_view(steps, key="example_chart")


def _raw_and_rendered(text: str) -> None:
    st.subheader("Raw text and rendered Markdown", anchor=False)
    st.markdown("The API returns plain text; Markdown is the client's choice. Rendered here without HTML (any tag "
                "in the answer shows as text and never runs) and without anything remote: an image is named, not "
                "loaded, and a link shows its target instead of being clickable.")
    raw, rendered = st.columns(2, border=True)
    with raw:
        st.caption("Raw content, as the client receives it")
        st.code(text, language=None, wrap_lines=True)
    with rendered:
        st.caption("Rendered as Markdown")
        st.markdown(safe_markdown(text))


def _response(answer) -> None:
    st.subheader("The final response object", anchor=False)
    response = answer.response
    chunks = [e.data for e in answer.stream if e.data is not None]
    streamed_text, streamed_finish, streamed_usage = assemble(chunks)
    st.markdown(
        f"`finish_reason`: **{response['choices'][0]['finish_reason']}**; `usage.completion_tokens` = "
        f"**{response['usage']['completion_tokens']}** = the number of tokens generated "
        f"({len(answer.generation.steps)}). The same run's stream, joined back together, "
        + ("gives exactly this content and finish_reason." if (streamed_text, streamed_finish) ==
           (response["choices"][0]["message"]["content"], response["choices"][0]["finish_reason"])
           else "**differs** from this content.")
    )
    st.json(response)
    if streamed_usage is None:
        st.caption("The stream itself carried no usage (include_usage is off); a non-streamed response always has it.")


def render() -> None:
    with stage_page("detokenization") as settings:
        _, answer = answered_prompt(settings)
        loaded = loaded_model()
        _lesson(answer)
        st.subheader("This answer, token by token", anchor=False)
        _chart(answer.detokenized, key="answer_chart")
        st.caption("Ids → bytes → text: each generated token's bytes, and the bytes of an unfinished character the "
                   "detokenizer held back after it; the table below adds what it emitted when each token arrived.")
        if not details_ready(DETAILS):
            return
        _steps_table(answer.detokenized, key="answer_chart")
        _split_example(loaded)
        _raw_and_rendered(answer.generation.text)
        _response(answer)
