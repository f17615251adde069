"""The Embeddings page's lessons: the prompt as rows of the embedding table, and what the PCA map shows of them."""

from __future__ import annotations




def embedding_sentence(message_tokens: int, read_tokens: int, vocab: int, dims: int) -> str:
    """What the prompt enters the model as: its tokens, the chat template's, and one table row for each."""
    template = read_tokens - message_tokens
    read = (f"with the chat template's {template:,} more, the model reads **{read_tokens:,} tokens**" if template > 0
            else "the model reads exactly those")
    return (f"Your message became **{message_tokens:,} tokens**; {read}. Each token id picks one row of the "
            f"{vocab:,} x {dims} embedding table, so the prompt enters the model as {read_tokens:,} vectors of "
            f"**{dims} numbers** each.")


def pca_sentence(vectors: int, dims: int, top_two_share: float) -> str:
    """How much of the vectors' spread the two PCA directions show, and how many directions hold the rest."""
    rest = max(0, min(vectors - 1, dims) - 2)
    shown = (f"{vectors} vectors of {dims} numbers flattened onto the two directions along which they vary most "
             f"(PCA), which hold {top_two_share:.1%} of their spread.")
    if rest == 0:
        return shown + " With so few vectors these two directions hold all of it: the map is exact."
    where = "most of the spread" if top_two_share < 0.5 else "the rest of the spread"
    return (shown + f" Distances are only approximate: {where} is in the other {rest:,} direction"
            f"{'s' if rest > 1 else ''} ({vectors} points span at most {min(vectors - 1, dims):,}).")
