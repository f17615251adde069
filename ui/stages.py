"""The journey's pages in order, grouped by phase: the single source for navigation and the map."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StagePage:
    """One page of the app; ``url_path`` is its deep-link path ("" for home)."""

    title: str
    url_path: str
    icon: str
    summary: str

    @property
    def route(self) -> str:
        """The page's URL path as Streamlit registers it: home is served at "/" and at "/home"."""
        return self.url_path or "home"

    @property
    def view(self) -> str:
        """The module in views/ whose ``render()`` draws this page, named like the URL."""
        return "views." + self.route.replace("-", "_")


HOME = StagePage(
    "Journey map",
    "",
    ":material/route:",
    "Every stage of one chat-completions call, in order.",
)

PHASES: dict[str, tuple[StagePage, ...]] = {
    "The client and the API": (
        StagePage(
            "Request",
            "request",
            ":material/send:",
            "The JSON body your code sends, and the HTTP request that carries it.",
        ),
        StagePage(
            "Gateway",
            "gateway",
            ":material/shield:",
            "API key check, rate limits, routing and the call log before any model runs.",
        ),
        StagePage(
            "Failures and retries",
            "failures",
            ":material/sync_problem:",
            "A real client against real faults: what it retries, how long it waits, where it gives up.",
        ),
    ),
    "Inside the model": (
        StagePage(
            "Tokenization",
            "tokenization",
            ":material/data_array:",
            "Text becomes a list of token ids; different tokenizers cut it differently.",
        ),
        StagePage(
            "Context window",
            "context-window",
            ":material/width_normal:",
            "The chat template wraps every message; all of it must fit the window.",
        ),
        StagePage(
            "Embeddings",
            "embeddings",
            ":material/scatter_plot:",
            "Each token id becomes a vector of numbers the model computes with.",
        ),
        StagePage(
            "Forward pass",
            "forward-pass",
            ":material/layers:",
            "One transformer block opened up at one token, and the residual stream through every layer.",
        ),
        StagePage(
            "Attention",
            "attention",
            ":material/hub:",
            "Each position looks back at earlier tokens, layer by layer, head by head.",
        ),
        StagePage(
            "Next token",
            "next-token",
            ":material/bar_chart:",
            "The model's output: a probability for every token in the vocabulary.",
        ),
        StagePage(
            "Sampling",
            "sampling",
            ":material/casino:",
            "Temperature, top-p, top-k and min-p reshape that distribution before one token is drawn.",
        ),
        StagePage(
            "Structured output and tools",
            "structured-output",
            ":material/data_object:",
            "A grammar mask lets through only tokens that keep the answer valid JSON or a valid tool call.",
        ),
    ),
    "Back to the client": (
        StagePage(
            "Generation",
            "generation",
            ":material/repeat:",
            "The loop: append the chosen token, run again, until a stop token or max_tokens.",
        ),
        StagePage(
            "KV cache",
            "kv-cache",
            ":material/memory:",
            "Keys and values kept from earlier tokens: its size, prefill vs decode time, and prefix caching.",
        ),
        StagePage(
            "Streaming",
            "streaming",
            ":material/stream:",
            "Server-sent events carry each new piece of text as soon as it exists.",
        ),
        StagePage(
            "Detokenization and response",
            "detokenization",
            ":material/text_fields:",
            "Token ids become bytes, then text; the final response reports usage and why it stopped.",
        ),
        StagePage(
            "Agents and their attack surface",
            "agent",
            ":material/smart_toy:",
            "A program calls the model in a loop; the system prompt is a tendency, measured; temperature 0 is not a promise.",
        ),
    ),
    "In class": (
        StagePage(
            "Guess the next token",
            "guess",
            ":material/quiz:",
            "A game: guess the model's next token before its distribution is revealed, a few rounds, a score.",
        ),
        StagePage(
            "Take it home",
            "handout",
            ":material/download:",
            "This prompt's whole journey as one offline HTML file: every stage's numbers and charts.",
        ),
    ),
    "Your own calls": (
        StagePage(
            "Live calls",
            "live-calls",
            ":material/monitor_heart:",
            "Call this app's OpenAI-compatible API with curl or the openai SDK, then open that very call's journey.",
        ),
    ),
}

STAGES: tuple[StagePage, ...] = tuple(page for pages in PHASES.values() for page in pages)


def stage(url_path: str) -> StagePage:
    """The stage page registered under ``url_path`` (KeyError names the known paths otherwise)."""
    for page in STAGES:
        if page.url_path == url_path:
            return page
    raise KeyError(f"No stage page {url_path!r}; known: {[p.url_path for p in STAGES]}")


def phase_of(page: StagePage) -> str:
    return next(name for name, pages in PHASES.items() if page in pages)


def neighbours(page: StagePage) -> tuple[StagePage | None, StagePage | None]:
    """The previous and next stage in journey order (None at either end)."""
    index = STAGES.index(page)
    before = STAGES[index - 1] if index > 0 else None
    after = STAGES[index + 1] if index + 1 < len(STAGES) else None
    return before, after
