"""Home: the journey map. Every stage of one chat-completions call, grouped by phase, with links."""

import streamlit as st

from lifecycle.errors import LifecycleError
from lifecycle.model import ModelLoadError
from ui.frame import APP_TITLE, lesson, loaded_model, show_prompt
from ui.settings import current_settings
from ui.stages import PHASES

st.title(APP_TITLE, anchor=False)
lesson(
    "When your code calls a chat-completions API, one prompt travels through a dozen stages: "
    "it is packed into a JSON request, checked by a gateway, cut into tokens, wrapped in a chat "
    "template, turned into vectors, pushed through the model one token at a time, sampled, "
    "streamed back and decoded into text. Every page of this app follows **the same prompt** "
    "through one stage, computed live on a real small model running on this machine. Set the "
    "prompt and the sampling settings once in the sidebar; the URL carries them, so a copied "
    "link reopens the same page with the same prompt."
)

try:
    settings = current_settings()
except LifecycleError as error:
    st.error(error.message, icon=":material/error:")
else:
    show_prompt(settings.prompt)

try:
    model = loaded_model()
except ModelLoadError as error:
    st.error(str(error), icon=":material/error:")
else:
    st.caption(
        f"Model: {model.name}, {model.num_layers} layers, {model.num_heads} attention heads, "
        f"{model.vocab_size:,} tokens in its vocabulary, a context window of {model.context_window:,} "
        f"tokens; loaded in {model.load_seconds:.1f} s on CPU."
    )

for column, (phase, pages) in zip(st.columns(len(PHASES), border=True), PHASES.items()):
    with column:
        st.subheader(phase, anchor=False)
        for page in pages:
            st.page_link(page.script, label=page.title, icon=page.icon)
            st.caption(page.summary)
