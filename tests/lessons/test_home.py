"""The Home page's lessons: what the generation waited for, and where the call's time went."""

from lifecycle.lessons.home import engine_wait_sentence


def test_the_engine_wait_says_what_was_there():
    assert "at once" in engine_wait_sentence(0.0004, (), 0)
    alone = engine_wait_sentence(0.004, (), 0)
    assert "4.0 ms" in alone and "nothing else was in the engine" in alone and "other requests" not in alone
    busy = engine_wait_sentence(0.5963, ("page", "api", "page"), 1)
    assert "596.3 ms" in busy and "2 page requests, 1 api request and 1 exclusive job" in busy
    job = engine_wait_sentence(0.45, (), 1)
    assert "1 exclusive job (an inspection pass" in job and "request" not in job.split("held")[1]
