"""The Detokenization page's lesson: the answer's ids, their bytes, and the bytes held back or dropped."""

from __future__ import annotations




def detokenized_sentence(tokens: int, token_bytes: int, waits: int, dropped: int, special: int, characters: int,
                         finish_reason: str, usage: dict) -> str:
    """The Detokenization page's lesson: the answer's ids, the bytes that became its content, the tokens whose
    bytes were held back, and the bytes of a character the answer stopped inside (never content: dropped).

    ``token_bytes`` are the bytes of the content tokens (special ones not counted), ``dropped`` the bytes
    still held after the last step: 47 bytes in 30 tokens cut off at max_tokens two bytes into a character
    make 45 bytes of content, not 47.
    """
    if not waits:
        held = "none of them split a character, so nothing had to be held back (the example below has some)"
    elif not dropped:
        held = (f"**{waits}** of them ended inside a character, so their bytes were **held back** until the next "
                "token completed it")
    else:
        held = (f"**{waits}** of them ended inside a character, so their bytes were **held back** until a later "
                f"token completed it; the answer stopped inside its last character, so those **{dropped} "
                f"byte{'s' * (dropped != 1)}** never became text and were dropped")
    left_out = (f"{special} special token{'s' * (special != 1)} (end of turn) {'was' if special == 1 else 'were'} left "
                "out of the content. " if special else "")
    return (f"The model never produces text: it produced **{tokens:,} token id{'s' * (tokens != 1)}**. Each id stands "
            f"for a run of bytes (**{token_bytes - dropped:,} bytes** of content in all), and the bytes are UTF-8 text "
            f"only once a whole character is there: {held}. {left_out}"
            f"The text became the `content` of the final response: **{characters:,} characters**, "
            f"`finish_reason` **{finish_reason}**, and usage of **{usage['total_tokens']:,} tokens** "
            f"({usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion).")
