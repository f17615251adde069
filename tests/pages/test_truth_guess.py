"""Every number the Guess page states, for two prompts and every round, against an independent recomputation.

The page runs under AppTest and the game is played to its end: typed guesses and picked options. This file
recomputes without lifecycle.features.guess or the page's cached distribution: each round's distribution with
transformers' own forward pass of the loaded model on the tokenizer's own ``apply_chat_template``, a typed
guess's readings with the tokenizer's ``encode`` (as typed, with a leading space, stripped; the best-ranked
first token), every rank by counting higher probabilities, the points by the rule the lesson itself states,
and the score by adding. The Next token page must name the same favourite at the same probability.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns, plotly_figure, run_page
from tests.pages.recompute import next_token_probs, rank_range, template_ids
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
# What the player does each round: a typed text, or the place of the option to pick in the page's order. " 10" is
# typed with a space the answer's first token lacks: only its stripped reading ranks high.
PLAYS = ["New Delhi", 1, " 10", 0]
PROBABILITY_ABS = 0.0015  # the engine's and transformers' probabilities, as printed to 0.01%
REVEALED = 10


def _rule(lesson: str) -> list[tuple[range, int]]:
    """The points rule the lesson states ("rank 1: 10; ranks 2–5: 5; ...; lower: 0") as (ranks, points)."""
    stated = re.search(r"Points by rank: (.*?); lower: 0", lesson).group(1)
    rule = []
    for part in stated.split("; "):
        ranks, points = part.split(": ")
        low, _, high = ranks.removeprefix("ranks ").removeprefix("rank ").partition("–")
        rule.append((range(int(low), int(high or low) + 1), int(points)))
    return rule


def _points(rule: list[tuple[range, int]], rank: int) -> int:
    return next((points for ranks, points in rule if rank in ranks), 0)


def _reading(loaded, probs: np.ndarray, guess: str) -> tuple[int, bool]:
    """The token a typed guess is read as (the best-ranked first token of its readings) and whether it splits."""
    readings = []
    for text in dict.fromkeys((guess, " " + guess.lstrip(), guess.strip())):
        ids = reference_tokenizer(loaded).encode(text, add_special_tokens=False)
        readings.append((-probs[ids[0]], ids[0], len(ids) > 1))
    _, token, split = min(readings)
    return int(token), split


def _metrics(app) -> dict[str, str]:
    return {m.proto.label: m.proto.body for m in app.get("metric")}


def _sentence(app) -> str:
    return next(m for m in markdowns(app) if m.startswith("Your guess")).replace("\\", "")


def _play(app, index: int, play: str | int, loaded, probs: np.ndarray) -> tuple[int, bool]:
    """Lock in this round's guess; the token it must be read as and whether it splits."""
    if isinstance(play, str):
        app.text_input(key=f"guess_text_{index}").input(play)
        token, split = _reading(loaded, probs, play)
    else:
        pills = app.get("button_group")[0]
        by_label = {show_token(reference_tokenizer(loaded).decode([int(i)])): int(i) for i in np.argsort(-probs)[:40]}
        token, split = by_label[pills.options[play]], False
        pills.set_value(token)
    next(b for b in app.button if b.proto.label == "Lock in and reveal").click().run()
    assert not app.exception and not app.error
    return token, split


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def game(request, loaded) -> dict:
    """The game played to its end: the lesson, and per round what the page showed and what was recomputed."""
    app = run_page("guess", prompt=request.param, temperature=0)
    assert not app.exception and not app.error
    lesson = next(m for m in markdowns(app) if "A game for a class" in m)
    rounds = []
    index = 0
    while not any(h.value == "Final score" for h in app.subheader):
        prompt = app.text[-1].value  # after the sidebar's own
        probs = next_token_probs(loaded, template_ids(loaded, prompt))
        score = next(m for m in app.get("metric") if m.proto.label == "Your score").proto
        before = {"charts": len(app.get("plotly_chart")), "heading": app.subheader[0].value,
                  "score": score.body, "after": score.delta}
        token, split = _play(app, index, PLAYS[index % len(PLAYS)], loaded, probs)
        rounds.append({"prompt": prompt, "probs": probs, "token": token, "split": split, "before": before,
                       "metrics": _metrics(app), "sentence": _sentence(app),
                       "bars": plotly_figure(app, f"guess_bars_{index}").data[0]})
        app.button(key=f"guess_next_{index}").click().run()
        assert not app.exception and not app.error
        index += 1
    final = next(frame.value for frame in app.dataframe if "points" in frame.value.columns)
    return {"prompt": request.param, "lesson": lesson, "rounds": rounds, "final": final,
            "score": _metrics(app)["Your score"]}


def test_the_lesson_counts_the_rounds_played_and_the_whole_vocabulary(game, loaded):
    lesson, rounds = game["lesson"], game["rounds"]
    assert f"A game for a class, {len(rounds)} rounds." in lesson
    assert rounds[0]["prompt"] == game["prompt"]  # the sidebar's prompt is round 1
    assert f"among all {rounds[0]['probs'].size:,} tokens" in lesson
    assert rounds[0]["probs"].size == loaded.model.config.vocab_size


def test_nothing_is_revealed_before_the_guess(game):
    rounds = game["rounds"]
    for index, played in enumerate(rounds):
        assert played["before"]["charts"] == 0
        assert played["before"]["heading"] == f"Round {index + 1} of {len(rounds)}"


def test_each_guess_is_read_ranked_and_scored_as_the_model_and_the_rule_say(game):
    rule = _rule(game["lesson"])
    for played in game["rounds"]:
        probs, token, shown = played["probs"], played["token"], played["metrics"]
        rank = int(shown["Rank"].replace(",", ""))
        assert rank in rank_range(probs, token), (played["prompt"], rank)
        assert float(shown["Probability"].removesuffix("%")) / 100 == pytest.approx(probs[token], abs=PROBABILITY_ABS)
        assert int(shown["Points"]) == _points(rule, rank)
        verdict = "exactly the model's top choice" if rank == 1 else f"rank {rank:,} of {probs.size:,}"
        sentence = played["sentence"]
        assert f": **{verdict}**, with probability **{shown['Probability']}**, worth **{shown['Points']} points**" \
            in sentence
        assert ("only its first one is scored" in sentence) == played["split"]


def test_the_token_a_guess_was_read_as_is_named(game, loaded):
    for played in game["rounds"]:
        named = show_token(reference_tokenizer(loaded).decode([played["token"]]))
        assert f"was read as the token '{named}'" in played["sentence"]


def test_the_reveal_shows_the_models_own_favourite_and_top_ten(game, loaded):
    for played in game["rounds"]:
        probs, bars = played["probs"], played["bars"]
        order = np.argsort(-probs)[:REVEALED]
        favourite = int(order[0])
        stated = re.search(r"The model's favourite was '(.*)' at ([\d.]+)%\.", played["sentence"])
        assert stated.group(1) == show_token(reference_tokenizer(loaded).decode([favourite]))
        assert float(stated.group(2)) / 100 == pytest.approx(probs[favourite], abs=PROBABILITY_ABS)
        ids = [int(row[0]) for row in bars.customdata]
        assert len(ids) == REVEALED
        np.testing.assert_allclose(bars.x, probs[order], atol=PROBABILITY_ABS)
        for place, token in enumerate(ids):
            assert place + 1 in rank_range(probs, token)


def test_the_score_is_the_sum_of_the_rounds_points(game):
    rounds, final = game["rounds"], game["final"]
    best = max(points for _, points in _rule(game["lesson"]))
    points = [int(played["metrics"]["Points"]) for played in rounds]
    for index, played in enumerate(rounds):
        assert played["before"]["score"] == f"{sum(points[:index])} / {best * len(rounds)}"
        assert played["before"]["after"] == f"after {index} of {len(rounds)} rounds"
    assert game["score"] == f"{sum(points)} / {best * len(rounds)}"
    assert list(final["round"]) == list(range(1, len(rounds) + 1))
    assert list(final["points"]) == points
    assert list(final["rank"]) == [int(p["metrics"]["Rank"].replace(",", "")) for p in rounds]
    assert list(final["probability"]) == [p["metrics"]["Probability"] for p in rounds]


def test_the_next_token_page_names_the_same_favourite(game):
    next_token = run_page("next-token", prompt=game["prompt"], temperature=0)
    assert not next_token.exception and not next_token.error
    stated = re.search(r"The model's favourite was '(.*)' at ([\d.]+)%\.", game["rounds"][0]["sentence"])
    assert f"The most likely next token is '{stated.group(1)}' at **{stated.group(2)}%**" in \
        markdowns(next_token)[1].replace("\\", "")
