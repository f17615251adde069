"""The Context window page's lessons: the prompt's budget in the window, the trained window, and what
truncation drops."""

from __future__ import annotations

from lifecycle.stages.context_window import ContextBudget, RenderedPrompt


def window_sentence(model_name: str, trained_positions: int) -> str:
    """What the trained window means: attention past it is possible, quality is not."""
    return (f"{model_name} was trained on up to {trained_positions:,} positions. Its attention can reach past them "
            "(nothing in the arithmetic stops it), but the answers get worse beyond what it was trained on, so this "
            f"app, like an API, refuses a request that needs more than {trained_positions:,}")


def overflow_demo_sentence(window: int, journey_window: int, example_messages: int | None, journey_messages: int) -> str:
    """How the truncation demo differs from the journey: its window, and whose history it truncates."""
    history = (f"an example history of {example_messages} messages instead of your {journey_messages}"
               if example_messages is not None else f"your own {journey_messages} earlier messages")
    size = ("the journey's own window" if window == journey_window
            else f"a {window:,}-token window where the journey has {journey_window:,}")
    return f"Not the journey's settings: {size}, and {history}. The journey itself is not truncated here."


def budget_lesson(model_name: str, prompt: RenderedPrompt, budget: ContextBudget, message_tokens: int) -> str:
    """The page's lesson: what the model receives for the message, the template's overhead, and what the
    window leaves free once max_tokens is reserved (or how far the prompt overflows it)."""
    tokens = {s.name: s.tokens for s in prompt.segments}
    around = "".join(f", {count:,} for the {name}" for name, count in tokens.items()
                     if name not in ("template", "new message"))
    fit = (f"**{budget.free:,} tokens stay free** ({100 * budget.free / budget.window:.1f}% of it)"
           if budget.fits else f"it **overflows by {budget.overflow:,} tokens**")
    return (
        f"Your message is {message_tokens:,} tokens, but {model_name} receives **{budget.prompt_tokens:,}**: "
        f"the chat template adds {tokens['template']:,} tokens of overhead (special markers, role names, "
        f"newlines){around}. With max_tokens = {budget.output_reserve:,} reserved for the answer, of the "
        f"{budget.window:,}-token window {fit}. Every call resends all of it: the API keeps no state."
    )


def truncation_lesson(window: int, overflow: int, strategy: str, dropped: int, history: int, prompt_tokens: int,
                      free: int) -> str:
    """The overflow demo's lesson: by how much the conversation overflows the window, and what dropping the
    oldest turns (``strategy``, the truncation's name) removed of its ``history`` messages and left free."""
    return (
        f"The conversation overflows the {window:,}-token window by **{overflow:,} tokens**. "
        f"Dropping the oldest turns first (`{strategy}`) removes **{dropped} of "
        f"{history} history messages**; the prompt shrinks to {prompt_tokens:,} tokens "
        f"and {free:,} stay free. The system prompt and the new message are always kept, and the "
        "model simply never sees what was dropped."
    )
