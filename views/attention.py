"""Attention page: attention weights per layer and head, and the logit lens across layers."""

import numpy as np
import streamlit as st

from lifecycle.vocabulary import show_token

from charts.attention import attention_bars, attention_heatmap, attention_mosaic, logit_lens_chart
from charts.embeddings import token_labels
from lifecycle.forward import ForwardPass, run_forward, token_text
from ui.frame import lesson, loaded_model, stage_page
from ui.tables import fitted_table
from ui.cache import inspected_prompt
from ui.text import quoted

PRONOUN_SENTENCE = "The programmer fixed the bug because it caused crashes."
PRONOUN, ANTECEDENT = " it", " bug"


@st.cache_resource(max_entries=1, show_spinner="Running the pronoun example through the model…")
def pronoun_pass() -> tuple[ForwardPass, list[str]]:
    """The example sentence alone (no chat template), every layer's attention."""
    loaded = loaded_model()
    with loaded.tokenizer_lock:
        ids = loaded.tokenizer.encode(PRONOUN_SENTENCE, add_special_tokens=False)
    return run_forward(loaded, ids), [token_text(loaded, i) for i in ids]


def use_pronoun_example() -> None:
    st.session_state["prompt"] = PRONOUN_SENTENCE


def strongest_head(forward: ForwardPass, query: int, key: int) -> tuple[int, int, float]:
    """(layer, head, weight) of the head where ``query`` attends most to ``key``."""
    layer, head, weight = max(
        ((layer, head, float(weights[head, query, key])) for layer, weights in forward.attentions.items()
         for head in range(weights.shape[0])),
        key=lambda found: found[2],
    )
    return layer, head, weight


with stage_page("attention") as settings:
    _, inspection = inspected_prompt(settings)
    loaded = loaded_model()
    config = loaded.model.config
    forward = inspection.forward
    offset = forward.attention_offset
    texts = [token_text(loaded, i) for i in forward.ids]
    labels = token_labels(texts[offset:], start=offset)
    stacked = np.stack([forward.attentions[layer] for layer in sorted(forward.attentions)])
    # Every layer's and head's row for the last token, without the first token and the token itself.
    last = stacked[:, :, -1, 1:-1] if stacked.shape[-1] > 2 else stacked[:, :, -1, :]
    skip = 1 if stacked.shape[-1] > 2 else 0
    sink = float(stacked[..., 0].mean())
    layer_top, head_top, key_top = np.unravel_index(int(last.argmax()), last.shape)
    group = config.num_attention_heads // config.num_key_value_heads
    lesson(
        f"The model read **{len(forward.ids)} tokens**. In each of its **{config.num_hidden_layers} layers**, "
        f"**{config.num_attention_heads} attention heads** let every token gather information from itself and "
        f"the tokens before it (never after): each row of weights below sums to 1. The heads share "
        f"{config.num_key_value_heads} sets of keys and values, {group} query heads per set (grouped-query "
        f"attention, which shrinks the KV cache {group}x). Position enters here: queries and keys are rotated "
        f"by their position (RoPE) before they are compared. In this run, {sink:.0%} of all attention, "
        f"on average, lands on the very first token {quoted(texts[offset])}, a resting place heads use when nothing "
        f"else is relevant. Leaving that and itself aside, the last token {quoted(texts[-1])} attends most "
        f"strongly to {quoted(texts[offset + skip + key_top])} ({last[layer_top, head_top, key_top]:.0%}, in "
        f"layer {layer_top}, head {head_top}, shown first below)."
    )
    if forward.attention_note:
        st.info(forward.attention_note, icon=":material/content_cut:")

    st.subheader("One head, and the average of all heads", anchor=False)
    pick_layer, pick_head, pick_query = st.columns(3)
    layer = pick_layer.slider("Layer", 0, config.num_hidden_layers - 1, int(layer_top), key="attention_layer")
    head = pick_head.selectbox("Head", range(config.num_attention_heads), index=int(head_top),
                               key="attention_head",
                               format_func=lambda h: f"{h} (uses key/value head {h // group})")
    query = pick_query.selectbox("Query token", range(len(labels)), index=len(labels) - 1,
                                 format_func=lambda i: labels[i], key="attention_query")
    weights = forward.attentions[layer]
    # Tabs, not columns: each map gets the full width, so its token labels stay apart.
    one_head, all_heads = st.tabs([f"Head {head}", f"Mean of {len(weights)} heads"])
    one_head.plotly_chart(attention_heatmap(weights[head], labels, f"Layer {layer}, head {head}", query),
                          key="attention_head_map", theme=None)
    all_heads.plotly_chart(attention_heatmap(weights.mean(0), labels, f"Layer {layer}, mean of {len(weights)} heads",
                                             query), key="attention_mean_map", theme=None)
    st.markdown(f"**What does {quoted(texts[offset + query])} attend to?** (layer {layer}, head {head})")
    st.plotly_chart(attention_bars(weights[head, query], labels, query), key="attention_bars", theme=None)

    st.subheader(f"All {len(stacked)} layers x {stacked.shape[1]} heads", anchor=False)
    st.plotly_chart(attention_mosaic(forward.attentions), key="attention_mosaic", theme=None)
    st.caption("Each tile is one head's query x key map (query down, key across), averaged down to at most "
               "24 x 24 cells. A bright left edge is attention to the first token, a bright diagonal a head "
               "looking at the token itself or its neighbour. Colours follow the square root of the weight, so "
               "small weights stay visible.")

    st.subheader("Does a pronoun find its noun?", anchor=False)
    example, example_texts = pronoun_pass()
    it = example_texts.index(PRONOUN)
    noun = example_texts.index(ANTECEDENT)
    ex_layer, ex_head, ex_weight = strongest_head(example, it, noun)
    ex_labels = token_labels(example_texts)
    st.markdown(
        f"Computed on the sentence alone (no chat template), whatever the sidebar prompt: in **layer {ex_layer}, "
        f"head {ex_head}**, the token {quoted(PRONOUN)} puts **{ex_weight:.0%}** of its attention on {quoted(ANTECEDENT)}, "
        f"the noun it refers to: the strongest such head of all "
        f"{len(example.attentions) * config.num_attention_heads}. The outlined row is the pronoun's."
    )
    st.text(PRONOUN_SENTENCE)
    ex_left, ex_right = st.container(), st.container()  # one under the other, full width
    ex_left.plotly_chart(attention_heatmap(example.attentions[ex_layer][ex_head], ex_labels,
                                           f"Layer {ex_layer}, head {ex_head}", it), key="pronoun_map", theme=None)
    ex_right.plotly_chart(attention_bars(example.attentions[ex_layer][ex_head, it], ex_labels, it),
                          key="pronoun_bars", theme=None)
    st.button("Use the pronoun example as the prompt", on_click=use_pronoun_example, key="pronoun_button",
              help="Sets the sidebar prompt to this sentence, so every page follows it (inside the chat template).")

    st.subheader("Logit lens: each layer's guess for the next token", anchor=False)
    final = inspection.next_token.top(1)[0]
    lens = forward.logit_lens
    first_right = next((g.layer for g in lens if g.candidates[0].id == final.id), None)
    st.markdown(
        f"Push each layer's hidden state at the last position through the final norm and the output head, as "
        f"if the model stopped there. The full model's answer is {quoted(final.text)} ({final.probability:.0%}); "
        + (f"it first comes out on top at layer {first_right} of 0-{len(lens) - 1}. " if first_right is not None
           else "")
        + "The last layer's guess is the model's answer: it is the same computation."
    )
    st.plotly_chart(
        logit_lens_chart([g.layer for g in lens], [g.candidates[0].text for g in lens],
                         [g.candidates[0].probability for g in lens], final.text),
        key="logit_lens", theme=None
    )
    fitted_table(
        {
            "layer": [g.layer for g in lens],
            "top guess": [show_token(g.candidates[0].text) for g in lens],
            "probability": [round(g.candidates[0].probability, 4) for g in lens],
            "runners-up": [", ".join(show_token(c.text) for c in g.candidates[1:4]) for g in lens],
            "entropy (bits)": [round(g.entropy_bits, 2) for g in lens],
        },
        {"layer": "layer", "top guess": "top guess", "probability": "probability", "entropy (bits)": "bits"},
        key="logit_lens_table", full_from=420, hide_index=True,
        narrow_widths={"layer": 50, "top guess": 120, "probability": 90, "bits": 60},
    )
