"""Tokenization page: the prompt as tokens under the model's tokenizer, o200k_base and cl100k_base.

The chips are the picture: the charts and tables under them (Plotly, data grids: code the browser loads
before it draws anything of the run that holds them) come in the run after the chips are drawn (ui.when_idle).
"""

import pandas as pd
import streamlit as st

from charts.tokenization import ENCODING_LABELS, SHORT_LABELS, language_token_chart, token_chips_html, tokenizer_count_chart
from lifecycle.stages.context_window import render_messages
from lifecycle.stages.tokenization import ENCODINGS, MODEL_ENCODING, Tokenization, tokenize, tokenize_ids
from lifecycle.lessons.tokenization import languages_lesson, tokenization_lesson
from lifecycle.stages.vocabulary import TOKEN_NOTATION, show_token
from ui.cache import per_prompt_cache
from ui.frame import lesson, loaded_model, stage_page
from ui.tables import fitted_table
from ui.when_idle import details_ready

DETAILS = "tokenization_details"  # ui.when_idle: everything under the chips comes once they are drawn
MAX_CHIPS = 120  # per tokenizer, side by side; thousands of chips slow the browser and bury the page
MAX_TEMPLATE_CHIPS = 300
MAX_TABLE_ROWS = 2_000
# One sentence, translated; the token counts are computed on the page.
TRANSLATIONS = {
    "English": "The weather is nice today, so we are going to the park.",
    "German": "Das Wetter ist heute schön, also gehen wir in den Park.",
    "Spanish": "Hoy hace buen tiempo, así que vamos al parque.",
    "Chinese": "今天天气很好，所以我们要去公园。",
    "Japanese": "今日は天気がいいので、公園に行きます。",
    "Hindi": "आज मौसम अच्छा है, इसलिए हम पार्क जा रहे हैं।",
    "Arabic": "الطقس جميل اليوم، لذلك سنذهب إلى الحديقة.",
    "Russian": "Сегодня хорошая погода, поэтому мы идём в парк.",
    "Korean": "오늘 날씨가 좋아서 우리는 공원에 갑니다.",
}
# Example input prices in US$ per million tokens: GPT-4o and GPT-4 (8k) list prices; SmolLM2 runs
# locally here, so its price stands for a hypothetical hosted small model. All editable.
DEFAULT_PRICES = {MODEL_ENCODING: 0.10, "o200k_base": 2.50, "cl100k_base": 30.00}


@per_prompt_cache
def tokenized(text: str, encoding: str) -> Tokenization:
    return tokenize(text, encoding)


@per_prompt_cache
def rendered_tokens(ids: tuple[int, ...]) -> Tokenization:
    return tokenize_ids(ids)


def show_chips(result: Tokenization, limit: int = MAX_CHIPS) -> None:
    st.html(token_chips_html(result.tokens, limit))
    if result.count > limit:
        st.caption(f"Showing the first {limit:,} of {result.count:,} tokens; {result.count - limit:,} not drawn.")


def render() -> None:
    with stage_page("tokenization") as settings:
        model = loaded_model()
        results = {encoding: tokenized(settings.prompt, encoding) for encoding in ENCODINGS}
        mine = results[MODEL_ENCODING]
        rendered = render_messages(settings.messages())
        rendered_result = rendered_tokens(tuple(rendered.ids))
        special = [token for token in rendered_result.tokens if token.special]
        partial = sum(token.partial for token in mine.tokens)
        lesson(tokenization_lesson(len(settings.prompt), mine.count, model.name, mine.chars_per_token, model.vocab_size,
                                   results["o200k_base"].count, results["cl100k_base"].count, partial))

        st.subheader("Three tokenizers, side by side", anchor=False)
        for column, (encoding, result) in zip(st.columns(len(ENCODINGS)), results.items()):
            with column:
                difference = result.count - mine.count
                st.metric(ENCODING_LABELS[encoding], f"{result.count:,} tokens",
                          f"{difference:+,} vs the model" if difference else None, delta_color="inverse")
                st.caption(f"{result.chars_per_token:.2f} characters per token")
                show_chips(result)
        st.caption(
            "Hover a chip for its position, id and bytes. How every page writes a token: "
            f"{TOKEN_NOTATION} A dashed chip holds part of a character."
        )
        if not details_ready(DETAILS):
            return
        st.plotly_chart(tokenizer_count_chart({e: r.count for e, r in results.items()}), width="stretch", theme=None)

        with st.expander(f"All {mine.count:,} tokens of {model.name}'s tokenizer as a table"):
            st.dataframe(
                pd.DataFrame(
                    {
                        "position": range(min(mine.count, MAX_TABLE_ROWS)),
                        "id": [t.id for t in mine.tokens[:MAX_TABLE_ROWS]],
                        "text": [show_token(t.text) for t in mine.tokens[:MAX_TABLE_ROWS]],
                        "bytes (hex)": [t.bytes.hex(" ").upper() for t in mine.tokens[:MAX_TABLE_ROWS]],
                        "characters": [f"{t.start}–{t.end}" for t in mine.tokens[:MAX_TABLE_ROWS]],
                    }
                ),
                hide_index=True,
            )
            if mine.count > MAX_TABLE_ROWS:
                st.caption(f"First {MAX_TABLE_ROWS:,} of {mine.count:,} tokens.")

        st.subheader("What the model actually reads: the chat template's tokens", anchor=False)
        st.markdown(
            f"The chat template wraps your message into **{len(rendered.ids):,} tokens**, {len(special)} of them special "
            "markers (`<|im_start|>`, `<|im_end|>`) that only the template can place: typed by a user, the same "
            "characters are ordinary text."
        )
        st.caption(
            f"{len(rendered.ids):,} tokens; the dark chips are special tokens: "
            + ", ".join(f"{text} (id {tid}) ×{sum(t.id == tid for t in special)}"
                        for tid, text in sorted({(t.id, t.text) for t in special}))
        )
        show_chips(rendered_result, MAX_TEMPLATE_CHIPS)

        st.subheader("The same sentence in nine languages", anchor=False)
        languages = list(TRANSLATIONS)
        counts = {e: [tokenized(text, e).count for text in TRANSLATIONS.values()] for e in ENCODINGS}
        lesson(languages_lesson(model.name, counts))
        st.plotly_chart(language_token_chart(languages, counts), width="stretch", theme=None)
        # One column per tokenizer ("tokens (× English)") keeps all three in view, even on a projector.
        table = pd.DataFrame({"language": languages})
        for encoding in ENCODINGS:
            table[ENCODING_LABELS[encoding]] = [f"{c} ({c / counts[encoding][0]:.2f}×)" for c in counts[encoding]]
        table["sentence"] = list(TRANSLATIONS.values())
        short_names = {"language": "language", **{ENCODING_LABELS[e]: SHORT_LABELS[e] for e in ENCODINGS}}
        fitted_table(table, short_names, key="language_table", full_from=680, hide_index=True,
                     column_config={"sentence": st.column_config.TextColumn(width="medium")},
                     narrow_widths={"language": 80, **{SHORT_LABELS[e]: 85 for e in ENCODINGS}},
                     more="All columns, with the sentences")
        st.caption("Each cell: tokens for the sentence, and in brackets that count relative to English.")

        st.subheader("What your prompt costs", anchor=False)
        st.caption(
            "Prices are examples in US$ per million input tokens (GPT-4o and GPT-4 list prices; SmolLM2 runs "
            "locally here, so its price is a made-up hosted one). Edit them to your provider's."
        )
        prices = {}
        for column, encoding in zip(st.columns(len(ENCODINGS)), ENCODINGS):
            with column:
                prices[encoding] = st.number_input(
                    f"{ENCODING_LABELS[encoding]}: $ per 1M tokens", min_value=0.0, max_value=1000.0,
                    value=DEFAULT_PRICES[encoding], step=0.05, format="%.2f", key=f"price_{encoding}",
                )
        costs = pd.DataFrame(
            {
                "tokenizer": [ENCODING_LABELS[e] for e in ENCODINGS],
                "prompt tokens": [results[e].count for e in ENCODINGS],
                "$ per 1M tokens": [prices[e] for e in ENCODINGS],
                "$ for this prompt": [results[e].count * prices[e] / 1e6 for e in ENCODINGS],
                "$ for a million such prompts": [results[e].count * prices[e] for e in ENCODINGS],
            }
        )
        fitted_table(
            costs,
            costs.drop(columns="$ per 1M tokens").assign(tokenizer=[SHORT_LABELS[e] for e in ENCODINGS]).rename(
                columns={"prompt tokens": "tokens", "$ for this prompt": "this prompt",
                         "$ for a million such prompts": "1M prompts"}),
            key="cost_table", full_from=660, hide_index=True,
            column_config={
                "$ for this prompt": st.column_config.NumberColumn(format="$%.6f"),
                "$ for a million such prompts": st.column_config.NumberColumn(format="$%.2f"),
            },
            narrow_config={"this prompt": st.column_config.NumberColumn(format="$%.6f", width=100),
                           "1M prompts": st.column_config.NumberColumn(format="$%.2f", width=90)},
            narrow_widths={"tokenizer": 75, "tokens": 60},
        )
        st.caption("Only the message's own tokens are priced here; a chat API also bills the template and "
                   "history around it (see the Context window page) and the answer's tokens, usually at a higher rate.")
