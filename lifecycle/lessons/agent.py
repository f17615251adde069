"""The Agents page's lessons: the tool loop, the system prompt as a tendency, a rule hidden in a document,
and temperature 0's roads, each chosen by the run's own numbers."""

from __future__ import annotations

from collections.abc import Sequence

# How the tool loop ended, by AgentRun.outcome.
OUTCOMES = {"answered": "ended with a text answer", "cut_off": "ended when max_tokens cut the answer off",
            "round_limit": "reached its round limit still calling tools, without an answer"}


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def _moved(before: float, after: float) -> str:
    if round(100 * after) == round(100 * before):
        return f"stayed at **{_pct(after)}**"
    return f"{'fell' if after < before else 'rose'} from **{_pct(before)}** to **{_pct(after)}**"


def tendency_sentence(draws: int, leaks_without: int, leaks_with: int, mass_without: float, mass_with: float) -> str:
    """What the system prompt's rule did to the answers (counts of ``draws``) and to the first token."""
    if leaks_with < leaks_without:
        counted = (f"The rule in the system prompt lowered the share of answers that say the phrase from "
                   f"**{leaks_without} of {draws}** to **{leaks_with} of {draws}**")
        counted += ", not to 0." if leaks_with else (f": none in these {draws} draws, which is a count, not a "
                                                      "promise.")
    elif leaks_with == leaks_without:
        counted = (f"The rule in the system prompt did not change how many answers say the phrase: "
                   f"**{leaks_with} of {draws}** with it and without it.")
    else:
        counted = (f"The rule in the system prompt *raised* the share of answers that say the phrase, from "
                   f"**{leaks_without} of {draws}** to **{leaks_with} of {draws}**: naming the phrase put it in "
                   "front of the model, which reads a rule as more text.")
    return (f"{counted} At the answer's fixed start, the probability that the next token begins it "
            f"{_moved(mass_without, mass_with)}. The model follows its system prompt as a tendency it learned, "
            "not as a rule it enforces.")


def injection_sentence(draws: int, leaks_plain: int, leaks_hidden: int, mass_plain: float, mass_hidden: float) -> str:
    """How far the rule hidden in a pasted document moved the answers and the first token; when it moved
    neither, the page says so instead of drawing the lesson from no effect."""
    if leaks_plain == leaks_hidden and round(100 * mass_plain) == round(100 * mass_hidden):
        return (f"Hidden in the retrieved document, the same rule changed nothing measurable here: "
                f"**{leaks_hidden} of {draws}** answers say the phrase with it and without it, and the first-token "
                f"probability {_moved(mass_plain, mass_hidden)}. Pasted text can still steer a model (indirect "
                "prompt injection); this run shows no effect, not safety.")
    answers = (f"did not change how many answers say the phrase (**{leaks_hidden} of {draws}**)"
               if leaks_plain == leaks_hidden else
               f"moved the answers that say the phrase from **{leaks_plain}** to **{leaks_hidden} of {draws}**")
    return (f"Hidden in the retrieved document, the same rule {answers}, and the first-token probability "
            f"{_moved(mass_plain, mass_hidden)}: text an application pastes into a message is read like "
            "any other instruction (indirect prompt injection).")


def roads_sentence(steps: int, largest: Sequence[tuple[str, float]], changed: Sequence[tuple[str, Sequence[int]]],
                   narrowest_step: int, narrowest: float) -> str:
    """What the roads' differences did to a greedy answer of ``steps`` tokens."""
    worst = max((value for _, value in largest), default=0.0)
    if worst == 0.0:
        return (f"Every road gave the alone answer's logits **bit for bit** over its {steps} tokens here: on this "
                "machine these kernels add in the same order. That is this machine's luck, not a promise.")
    listed = ", ".join(f"{name} **{value:.1e}**" if value else f"{name} **0** (bit for bit)" for name, value in largest)
    flips = [(name, steps_) for name, steps_ in changed if steps_]
    if flips:
        where = "; ".join(f"{name} at step{'s' * (len(s) > 1)} {', '.join(map(str, s))}" for name, s in flips)
        outcome = f"and that was enough to change the greedy pick ({where})."
    else:
        ratio = narrowest / worst
        outcome = (f"and no greedy pick changed over the {steps} tokens: the narrowest gap between the two best "
                   f"logits was **{narrowest:.3g}** (step {narrowest_step}), **{ratio:,.0f}×** the largest "
                   "difference.")
    differ = "on some roads" if any(value == 0.0 for _, value in largest) else "on different roads"
    return (f"The same prompt at temperature 0 gets different logits {differ} (largest difference: "
            f"{listed}), because each kernel adds the same products in another order, {outcome}")


def summation_sentence(forward: float, backward: float, exact: float, terms: int) -> str:
    """One logit's dot product of ``terms`` products added in two orders."""
    if forward == backward:
        return (f"Summed forwards and backwards in fp32, the first token's logit comes out the same here "
                f"(**{forward:.7f}**; exact: {exact:.7f}).")
    return (f"Why: the first token's logit is a sum of {terms:,} products. Added forwards in fp32 it is "
            f"**{forward:.7f}**, backwards **{backward:.7f}**, exactly {exact:.7f}: the same numbers in another "
            "order round differently.")


def agent_loop_lesson(rounds: int, outcome: str, calls: int, errors: int, tools: Sequence[str],
                      first_prompt_tokens: int, last_prompt_tokens: int, last_cached_tokens: int) -> str:
    """The tool loop's lesson: how many calls of the model and how the loop ended (``outcome``, an
    ``AgentRun.outcome``), the tool calls the program ran, and over more than one round what the last round
    re-sent next to the first and how much of it the prefix cache served."""
    growth = (f" Round {rounds} re-sent **{last_prompt_tokens:,} prompt tokens** for round 1's "
              f"**{first_prompt_tokens:,}**, **{last_cached_tokens:,}** of them served by the prefix cache."
              if rounds > 1 else "")
    tool_names = ", ".join(f"`{name}`" for name in tools)
    return (
        f"The loop made **{rounds} call{'s' * (rounds != 1)}** of the model and "
        f"{OUTCOMES[outcome]}. The program ran **{calls} tool call{'s' * (calls != 1)}** here "
        f"({errors} answered with an error) and sent each result back as a `tool` message.{growth} "
        f"The model is stateless: every round sends the whole messages array again. Tools: {tool_names}; "
        "the first round must call one (tool_choice required), later rounds may answer (auto)."
    )
