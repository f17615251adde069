"""The Handout page's lesson: it counts what the file holds and names the stages whose numbers are not this run's."""

from lifecycle.features.handout import HandoutSection
from lifecycle.lessons.handout import handout_lesson


def _section(title: str, charts: int = 0, from_run: bool = True) -> HandoutSection:
    return HandoutSection(title, "", [], figures=["{}"] * charts, from_run=from_run)


def test_every_stage_from_the_run_is_said_so():
    text = handout_lesson([_section("Request"), _section("Next token", 1)], 3 * 2**20)
    assert "**2 stages**, each with its key numbers from this run, and **1 interactive charts**" in text
    assert "(3.0 MiB in all)" in text


def test_stages_not_from_the_run_are_named():
    text = handout_lesson([_section("Request", 2), _section("Failures and retries", from_run=False),
                           _section("Agents", from_run=False)], 2**19)
    assert "**3 stages**, 1 with their key numbers from this run and 2 (Failures and retries and Agents)" in text
    assert "each with its key numbers from this run" not in text and "(0.5 MiB in all)" in text
