"""KV cache page: sizes from the config agree with the real cache, and the measurements are drawn."""

from lifecycle.context import Conversation, render_prompt
from lifecycle.kv_cache import KVCacheShape
from tests.pages.harness import plotly_figure

PROMPT = "Why is the sea salty?"


def test_sizes_latency_and_turns(run_page, loaded):
    # The page times prefills up to 512 tokens and plays three turns: allow for a busy machine.
    app = run_page("kv-cache", timeout=420, prompt=PROMPT, temperature=0, max_tokens=3)
    assert not app.exception and not app.error
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    shape = KVCacheShape.of(loaded.model)
    expected = f"{shape.bytes_for(len(ids)) / 2**20:,.2f} MiB"
    metrics = {m.proto.label: m.proto.body for m in app.get("metric")}
    assert metrics["This prompt's cache"] == metrics["Measured tensors"] == expected
    assert f"{len(ids)} positions" in app.markdown[1].value
    latency = plotly_figure(app, "kv_latency")
    assert len(ids) in list(latency.data[0].x) and max(latency.data[0].x) >= 512
    turns = app.dataframe[0].value
    sent = turns["sent"].tolist()
    assert sent[0] == len(ids) and sent == sorted(sent) and len(sent) == 3
    assert (turns["repeated"][1:].values >= turns["sent"][:-1].values).all()
    assert (turns["cached_tokens"][1:].values >= turns["sent"][:-1].values).all()  # the prefix cache served them
