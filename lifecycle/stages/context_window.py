"""Context-window stage: the chat template turns a conversation into one id sequence, and the
window budget shows what each part of it costs and whether the answer still fits.

The prompt is the model's ChatML template (``<|im_start|>role\\n content <|im_end|>\\n`` per
message, then ``<|im_start|>assistant\\n``). It is assembled piece by piece: the template's
markers are the only special ids, and every message's content is encoded as plain text, so
``<|im_end|>`` typed by a user stays literal text. Text between two markers is encoded as one run
(as the tokenizer would), and each token is counted in the segment where its first character is.

Tool descriptions and retrieved documents are appended to the system turn, after the system
prompt, under the headings ``# Tools`` (the call format, then one JSON object per tool: see
lifecycle.features.tools) and ``# Retrieved documents`` (``[1] ...``). With no system prompt the template's own default system prompt is used (segment
"system prompt (default)"), with tools and documents appended to it when there are any.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lifecycle.errors import LifecycleError
from lifecycle.stages.tokenization import tokenize
from lifecycle.features.tools import assistant_text, tools_prompt

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
TEMPLATE = "template"
SYSTEM = "system prompt"
DEFAULT_SYSTEM = "system prompt (default)"
TOOLS = "tool descriptions"
DOCUMENTS = "retrieved documents"
HISTORY = "history"
NEW_MESSAGE = "new message"
SEGMENT_ORDER = (TEMPLATE, SYSTEM, DEFAULT_SYSTEM, TOOLS, DOCUMENTS, HISTORY, NEW_MESSAGE)
# Hosted models' window sizes, for comparison: accounting views only (a model cannot attend beyond its
# own window, which is its config's max_position_embeddings: ``LoadedModel.context_window``).
CONTEXT_WINDOWS = {"8k": 8192, "32k": 32768, "128k": 128000}
TRUNCATION_STRATEGY = "oldest_turns_first"


@dataclass
class Conversation:
    new_message: str
    system: str | None = None
    history: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    def system_pieces(self) -> list[tuple[str, str]]:
        """The system turn's content as (segment, text) pieces; empty when the template's default applies untouched."""
        if self.system is None and not self.tools and not self.documents:
            return []
        pieces = [(SYSTEM, self.system) if self.system is not None else (DEFAULT_SYSTEM, default_system_prompt())]
        if self.tools:
            pieces.append((TOOLS, tools_prompt([_tool_spec(tool) for tool in self.tools])))
        if self.documents:
            listed = "\n\n".join(f"[{n}] {doc}" for n, doc in enumerate(self.documents, 1))
            pieces.append((DOCUMENTS, "\n\n# Retrieved documents\n" + listed))
        return pieces

    def messages(self) -> list[dict]:
        """The OpenAI messages list this conversation sends."""
        pieces = self.system_pieces()
        head = [{"role": "system", "content": "".join(text for _, text in pieces)}] if pieces else []
        return head + [dict(m) for m in self.history] + [{"role": "user", "content": self.new_message}]


@dataclass
class ContextSegment:
    name: str
    tokens: int
    text: str


@dataclass
class RenderedPrompt:
    text: str
    ids: list[int]
    segments: list[ContextSegment]
    special_positions: list[int]
    raw: bool


@dataclass
class ContextBudget:
    window: int
    output_reserve: int
    segments: list[ContextSegment]
    prompt_tokens: int
    free: int
    overflow: int
    fits: bool


@dataclass
class Truncation:
    conversation: Conversation
    dropped: list[dict]
    budget: ContextBudget
    strategy: str


def _tool_spec(tool: dict) -> dict:
    """A tool's function definition, whether given as OpenAI's {"type": "function", "function": ...} or bare."""
    return tool.get("function", tool) if isinstance(tool, dict) else tool


def _loaded_tokenizer():
    from lifecycle.model import shared_model

    return shared_model()


def _marker_ids() -> dict[str, int]:
    loaded = _loaded_tokenizer()
    with loaded.tokenizer_lock:
        ids = {marker: loaded.tokenizer.convert_tokens_to_ids(marker) for marker in (IM_START, IM_END)}
    if any(token_id is None or token_id == loaded.tokenizer.unk_token_id for token_id in ids.values()):
        raise LifecycleError(f"{loaded.name} has no ChatML markers; only ChatML templates are supported.")
    return ids


def default_system_prompt() -> str | None:
    """The system prompt the model's template inserts when a conversation has none."""
    loaded = _loaded_tokenizer()
    probe = [{"role": "user", "content": "x"}]
    with loaded.tokenizer_lock:
        text = loaded.tokenizer.apply_chat_template(probe, tokenize=False)
    head = f"{IM_START}system\n"
    return text[len(head) : text.index(IM_END)] if text.startswith(head) else None


def _chatml_pieces(turns: list[tuple[str, list[tuple[str, str]]]]) -> list[tuple[str, str, bool]]:
    """(segment, text, is_marker) pieces of the template for (role, content pieces) turns."""
    pieces = []
    for role, content in turns:
        pieces += [(TEMPLATE, IM_START, True), (TEMPLATE, f"{role}\n", False)]
        pieces += [(segment, text, False) for segment, text in content]
        pieces += [(TEMPLATE, IM_END, True), (TEMPLATE, "\n", False)]
    return pieces + [(TEMPLATE, IM_START, True), (TEMPLATE, "assistant\n", False)]


def _assemble(pieces: list[tuple[str, str, bool]], raw: bool) -> RenderedPrompt:
    markers = _marker_ids() if not raw else {}
    ids, special_positions = [], []
    counts: dict[str, int] = {}
    texts: dict[str, list[str]] = {}
    run: list[tuple[str, str]] = []

    def flush_run() -> None:
        # Plain text between two markers is encoded in one go, exactly as the template's string would be.
        text = "".join(piece for _, piece in run)
        bounds, offset = [], 0
        for segment, piece in run:
            offset += len(piece)
            bounds.append((offset, segment))
        for token in tokenize(text).tokens:
            owner = next(segment for end, segment in bounds if token.start < end)
            counts[owner] = counts.get(owner, 0) + 1
            ids.append(token.id)
        run.clear()

    for segment, text, is_marker in pieces:
        texts.setdefault(segment, []).append(text)
        if is_marker:
            flush_run()
            special_positions.append(len(ids))
            ids.append(markers[text])
            counts[segment] = counts.get(segment, 0) + 1
        else:
            run.append((segment, text))
    flush_run()
    segments = [
        ContextSegment(name, counts.get(name, 0), "".join(texts[name]))
        for name in SEGMENT_ORDER
        if name in texts
    ]
    return RenderedPrompt(
        text="".join(text for _, text, _ in pieces),
        ids=ids,
        segments=segments,
        special_positions=special_positions,
        raw=raw,
    )


def _check_content(message: object, index: int) -> tuple[str, str]:
    if isinstance(message, dict) and message.get("role") == "assistant" and message.get("tool_calls"):
        return "assistant", assistant_text(message)
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise LifecycleError(f"messages[{index}] needs a string content.", param="messages")
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise LifecycleError(f"messages[{index}] has unknown role {role!r}.", param="messages")
    return role, message["content"]


def _with_default_system(turns: list[tuple[str, list[tuple[str, str]]]]):
    if turns and turns[0][0] == "system":
        return turns
    default = default_system_prompt()
    return ([("system", [(DEFAULT_SYSTEM, default)])] if default is not None else []) + turns


def shared_head() -> list[int]:
    """The tokens every one-message prompt under the default system prompt begins with: the
    template's system turn and the start of the user's turn."""
    first, second = (render_prompt(Conversation(text)).ids for text in ("A", "B"))
    length = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
    return list(first[:length])


def render_prompt(conversation: Conversation, raw: bool = False) -> RenderedPrompt:
    """The prompt this conversation sends; ``raw`` sends only the new message, without template."""
    if not isinstance(conversation.new_message, str):
        raise LifecycleError("The new message must be a string.", param="new_message")
    if raw:
        return _assemble([(NEW_MESSAGE, conversation.new_message, False)], raw=True)
    turns = [("system", conversation.system_pieces())] if conversation.system_pieces() else []
    for index, message in enumerate(conversation.history):
        role, content = _check_content(message, index)
        turns.append((role, [(HISTORY, content)]))
    turns.append(("user", [(NEW_MESSAGE, conversation.new_message)]))
    return _assemble(_chatml_pieces(_with_default_system(turns)), raw=False)


def render_messages(messages: list[dict], tools: list[dict] | None = None) -> RenderedPrompt:
    """The prompt for an API request's messages: a leading system message is the system prompt,
    the last message is the new message, everything between is history. ``tools`` (function
    definitions) are appended to the system turn as their own segment."""
    if not isinstance(messages, list) or not messages:
        raise LifecycleError("messages must be a non-empty list.", param="messages")
    turns = []
    for index, message in enumerate(messages):
        role, content = _check_content(message, index)
        if index == 0 and role == "system":
            segment = SYSTEM
        elif index == len(messages) - 1:
            segment = NEW_MESSAGE
        else:
            segment = HISTORY
        turns.append((role, [(segment, content)]))
    if tools:
        if not turns or turns[0][0] != "system":
            turns.insert(0, ("system", [(DEFAULT_SYSTEM, default_system_prompt() or "")]))
        turns[0][1].append((TOOLS, tools_prompt(tools)))
    return _assemble(_chatml_pieces(_with_default_system(turns)), raw=False)


def context_budget(prompt: RenderedPrompt, window: int, max_tokens: int) -> ContextBudget:
    """How the window is spent: the prompt's segments, the output reserve, and what is left."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise LifecycleError("The context window must be a positive whole number of tokens.", param="window")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise LifecycleError("max_tokens must be a whole number >= 1.", param="max_tokens")
    used = len(prompt.ids) + max_tokens
    return ContextBudget(
        window=window,
        output_reserve=max_tokens,
        segments=list(prompt.segments),
        prompt_tokens=len(prompt.ids),
        free=max(0, window - used),
        overflow=max(0, used - window),
        fits=used <= window,
    )


def _history_turns(history: list[dict]) -> list[list[dict]]:
    """History split into turns: each user message with the replies that follow it."""
    turns: list[list[dict]] = []
    for message in history:
        if not turns or (isinstance(message, dict) and message.get("role") == "user"):
            turns.append([])
        turns[-1].append(message)
    return turns


def truncate_oldest_turns(conversation: Conversation, window: int, max_tokens: int) -> Truncation:
    """Drop the fewest oldest history turns that make the prompt and reserve fit; the system
    prompt, tools, documents and new message are always kept."""
    turns = _history_turns(conversation.history)

    def attempt(drop: int) -> tuple[Conversation, ContextBudget]:
        kept = replace(conversation, history=[m for turn in turns[drop:] for m in turn])
        return kept, context_budget(render_prompt(kept), window, max_tokens)

    kept, budget = attempt(0)
    if not budget.fits:
        low, high = 1, len(turns)  # binary search: fewer tokens with every dropped turn
        kept, budget = attempt(high)
        if not budget.fits:
            raise LifecycleError(
                f"The prompt needs {budget.prompt_tokens} tokens plus {max_tokens} for the answer, "
                f"over the {window}-token window even with all history dropped.",
                param="messages",
                code="context_length_exceeded",
            )
        while low < high:
            middle = (low + high) // 2
            if attempt(middle)[1].fits:
                high = middle
            else:
                low = middle + 1
        kept, budget = attempt(high)
    dropped_count = len(conversation.history) - len(kept.history)
    return Truncation(
        conversation=kept,
        dropped=[dict(m) for m in conversation.history[:dropped_count]],
        budget=budget,
        strategy=TRUNCATION_STRATEGY,
    )
