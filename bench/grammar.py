"""Benchmark of grammar-constrained decoding (llguidance): what the constraint costs per token.

Measured on the structured-output test set's answers: the mask alone (llguidance filling its
bitmask + unpacking it to a vocabulary-sized boolean mask), the sampling stage with and without
the mask, and whole generations' seconds per token with and without a grammar (same prompts,
same number of tokens). Target: the mask costs <= 10% of a decode step. Run alone with ``python -m bench.grammar``.
"""

from __future__ import annotations

import statistics
import time

TARGET_SHARE = 0.10


def _median_ms(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def rows(loaded) -> list[tuple[str, str, str, str]]:
    """(name, measured, target, verdict) rows for ``bench``'s table."""
    import numpy as np

    from lifecycle.features import grammar
    from lifecycle.stages.context_window import render_messages
    from lifecycle.stages.generation import generate
    from lifecycle.stages.sampling import SamplingSettings, apply_sampling
    from lifecycle.features.tools import output_rules
    from tests.structured_cases import CASES, SCHEMAS

    out = []
    started = time.perf_counter()
    grammar._TOKENIZERS.pop(loaded.tokenizer, None)
    grammar.grammar_tokenizer(loaded)
    out.append(("grammar: tokenizer trie, once per model (s)", f"{time.perf_counter() - started:.2f}", "", ""))

    cases = CASES[::2]
    formats = [{"type": "json_schema", "json_schema": {"name": n, "schema": SCHEMAS[n], "strict": True}} for n, _ in cases]
    compile_ms = statistics.median(_median_ms(lambda f=f: output_rules(f).constraint(loaded).allowed(), 3) for f in formats)
    out.append(("grammar: check + compile a schema, first mask (ms)", f"{compile_ms:.1f}", "", ""))

    greedy = SamplingSettings(temperature=0)
    free_seconds, free_tokens, bound_seconds, bound_tokens, answers = 0.0, 0, 0.0, 0, []
    for (name, prompt), form in zip(cases, formats):
        ids = render_messages([{"role": "user", "content": prompt}]).ids
        rules = output_rules(form)
        bound = generate(loaded, ids, greedy, 160, constraint=rules.constraint(loaded))
        free = generate(loaded, ids, greedy, len(bound.steps))
        bound_seconds, bound_tokens = bound_seconds + sum(s.seconds for s in bound.steps[1:]), bound_tokens + len(bound.steps) - 1
        free_seconds, free_tokens = free_seconds + sum(s.seconds for s in free.steps[1:]), free_tokens + len(free.steps) - 1
        answers.append((rules, bound.token_ids))

    mask_times = []
    for rules, token_ids in answers:
        constraint = rules.constraint(loaded)
        for token_id in token_ids:
            started = time.perf_counter()
            constraint.allowed()
            mask_times.append(time.perf_counter() - started)
            constraint.accept(token_id)
    mask_ms = statistics.median(mask_times) * 1000
    out.append(("grammar: mask per token (ms, median / p95)",
                f"{mask_ms:.2f} / {np.percentile(mask_times, 95) * 1000:.2f}", "", ""))

    logits = np.random.default_rng(1).normal(0, 3, loaded.vocab_size).astype(np.float32)
    allowed = np.random.default_rng(2).random(loaded.vocab_size) < 0.01
    chain = SamplingSettings(temperature=0.8, top_p=0.9)
    plain_ms = _median_ms(lambda: apply_sampling(logits, chain), 30)
    masked_ms = _median_ms(lambda: apply_sampling(logits, chain, allowed=allowed), 30)
    out.append(("grammar: sampling stage without / with mask (ms)", f"{plain_ms:.2f} / {masked_ms:.2f}", "", ""))

    free_step, bound_step = free_seconds / free_tokens * 1000, bound_seconds / bound_tokens * 1000
    out.append(("grammar: decode step free / constrained (ms)", f"{free_step:.1f} / {bound_step:.1f}", "", ""))
    out.append(("  constrained / free step", f"{bound_step / free_step:.2f}x", "", ""))
    share = (mask_ms + max(0.0, masked_ms - plain_ms)) / free_step
    out.append(("grammar: mask cost / decode step", f"{share:.1%}", f"<= {TARGET_SHARE:.0%}",
                "ok" if share <= TARGET_SHARE else "MISSED"))
    return out


def main() -> None:
    from lifecycle.model import shared_model

    for name, value, target, verdict in rows(shared_model()):
        print(f"{name:<50} {value:>14}  {target:<18} {verdict}")


if __name__ == "__main__":
    main()
