"""The context budget as the API enforces it: a prompt that can never fit is refused before it is
tokenized, tool definitions that leave no room are refused naming ``tools``, and an overflow gets
OpenAI's ``context_length_exceeded`` in the words client libraries recognise."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from lifecycle.api.errors import ApiError
from lifecycle.api.exchange import Exchange
from lifecycle.errors import LifecycleError
from lifecycle.model import LoadedModel
from lifecycle.stages.context_window import TOOLS, context_budget, render_messages
from lifecycle.stages.request import DEFAULT_MAX_TOKENS, ChatRequest, check_token_ids
from lifecycle.stages.vocabulary import token_bytes


async def prompt_budget(chat: ChatRequest, loaded: LoadedModel, exchange: Exchange):
    """(prompt ids, max_tokens, context budget) of a prompt already known to be of a bounded size."""
    try:
        check_token_ids(chat, loaded.vocab_size)
        prompt = await asyncio.to_thread(render_messages, chat.messages, chat.output.definitions())
    except LifecycleError as error:
        raise ApiError(400, error.message, param=error.param, code=error.code) from error
    window = loaded.context_window
    refuse_unfit_tools(prompt, window, chat.max_tokens or 1)
    free = window - len(prompt.ids)
    max_tokens = chat.max_tokens or max(1, min(DEFAULT_MAX_TOKENS, free))
    budget = context_budget(prompt, window, max_tokens)
    exchange.prompt_tokens = budget.prompt_tokens
    exchange.journey["tokens"] = {"prompt_tokens": budget.prompt_tokens, "ids": prompt.ids[:2048],
                                  "special_positions": prompt.special_positions[:512]}
    exchange.journey["context"] = {**asdict(budget), "max_tokens_defaulted": chat.max_tokens is None}
    return prompt.ids, max_tokens, budget


def context_length_error(window: int, prompt_tokens: int | str, max_tokens: int,
                          headers: dict[str, str]) -> ApiError:
    total = prompt_tokens + max_tokens if isinstance(prompt_tokens, int) else f"more than {window}"
    # OpenAI's wording for a prompt that alone leaves no room: client libraries classify the error by
    # its text (langchain-openai's ContextOverflowError reads "Input tokens exceed the configured limit",
    # the openai SDKs put only the message in the exception's text, never the code).
    overflow = not isinstance(prompt_tokens, int) or prompt_tokens >= window
    lead = f"Input tokens exceed the configured limit of {window} tokens. " if overflow else ""
    return ApiError(
        400,
        f"{lead}This model's maximum context length is {window} tokens. However, you requested {total} tokens "
        f"({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce the length of "
        "the messages or completion.",
        param="messages", code="context_length_exceeded", headers=headers,
    )


def least_prompt_tokens(chat: ChatRequest, loaded: LoadedModel) -> int:
    """A lower bound of the prompt's tokens, without tokenizing: no token spans more bytes than the
    vocabulary's longest, so the messages need at least their bytes / that many tokens."""
    return -(-content_bytes(chat.messages) // token_bytes(loaded).longest)


def refuse_unfit_tools(prompt, window: int, max_tokens: int) -> None:
    """Tool definitions that alone leave no room for the messages and the answer: 400 naming tools."""
    tools = sum(segment.tokens for segment in prompt.segments if segment.name == TOOLS)
    if tools and window - tools < max_tokens + 1:
        raise ApiError(
            400,
            f"The tool definitions take {tools} tokens of the {window}-token context window, leaving no room for "
            f"the messages and {max_tokens} completion tokens. Send fewer or shorter tools.",
            param="tools", code="context_length_exceeded",
        )


def content_bytes(messages: list[dict]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            total += len(text.encode("utf-8", "replace")) if isinstance(text, str) else 0
    return total
