"""The pages' cache: keyed by the arguments, shared by every session, each stage fetched on its own."""

from streamlit.testing.v1 import AppTest


def _page():
    import streamlit as st

    from ui.cache import per_prompt_cache
    from ui.settings import JourneySettings

    calls = st.session_state.setdefault("calls", [])

    @per_prompt_cache
    def length(settings, _unhashable):
        calls.append(settings.prompt)
        return len(settings.prompt)

    st.session_state["values"] = [
        length(JourneySettings(prompt="abc"), object()),
        length(JourneySettings(prompt="abc"), object()),  # same settings: a hit, whatever _unhashable is
        length(JourneySettings.from_sidebar(prompt="abcd", temperature=0.1), object()),
    ]


def test_equal_arguments_hit_the_cache_and_underscored_ones_are_left_out_of_the_key():
    app = AppTest.from_function(_page).run()
    assert not app.exception
    assert app.session_state["calls"] == ["abc", "abcd"]
    assert app.session_state["values"] == [3, 3, 4]
    app.run()  # a rerun (another session alike) computes nothing again
    assert app.session_state["calls"] == ["abc", "abcd"]


def test_cached_journey_runs_the_sidebar_settings_once_per_prompt(loaded):
    def page():
        import streamlit as st

        from ui.cache import cached_journey, inspected_prompt, journey_results
        from ui.settings import JourneySettings

        settings = JourneySettings.from_sidebar(prompt="Say hi.", temperature=0.0, max_tokens=3, system_prompt="Be brief.")
        first, second = cached_journey(settings), cached_journey(settings)
        st.session_state["same"] = first.generation is second.generation and first.forward is second.forward
        st.session_state["inspection_is_shared"] = inspected_prompt(settings)[1].forward is first.forward
        st.session_state["journey"] = first
        st.session_state["computed"] = dict(journey_results().cache.computations)

    app = AppTest.from_function(page, default_timeout=180).run()
    assert not app.exception
    journey = app.session_state["journey"]
    assert app.session_state["same"] is True and app.session_state["inspection_is_shared"] is True
    assert journey.input.prompt == "Say hi." and journey.input.system == "Be brief."
    assert journey.input.sampling.temperature == 0.0 and journey.generation.completion_tokens <= 3
    assert "Say hi." in journey.rendered.text and "Be brief." in journey.rendered.text


def test_every_page_of_a_prompt_runs_each_model_stage_once(run_page, loaded):
    from lifecycle.results import shared_results

    settings = dict(prompt="Which pages run the model for this prompt?", temperature=0, max_tokens=4)
    computations = shared_results(loaded).cache.computations
    before = {stage: computations[stage] for stage in ("prefill", "inspect", "answer")}
    pages = ("", "request", "tokenization", "context-window", "embeddings", "attention", "next-token", "sampling",
             "generation", "streaming", "detokenization", "gateway")
    for _ in range(2):  # a second visit to every page, as a class moving back and forth
        for page in pages:
            app = run_page(page, **settings)
            assert not app.exception, page
    assert {stage: computations[stage] - before[stage] for stage in before} == {"prefill": 1, "inspect": 1, "answer": 1}


def test_a_run_that_waited_for_the_model_lays_the_page_out_as_one_that_did_not(loaded):
    """A page's elements keep their places whether its run waited for the answer and the prefill (showing
    their progress) or found them ready: Streamlit starts anew every element whose place changed, so a tab
    picked after a page had waited sprang back to the first at the next rerun."""
    def page():
        import streamlit as st

        from ui.cache import answered_prompt, journey_results, prefilled_prompt
        from ui.settings import JourneySettings

        settings = JourneySettings.from_sidebar(prompt=st.session_state.setdefault("prompt", "Name a colour."),
                                                temperature=0.0, max_tokens=4)
        results, inp = journey_results(), settings.journey_input()
        ready = [results.peek_answer(inp), results.cache.peek(results.prefill_key(inp))]
        st.session_state["waited"] = not all(p is not None and p.done() for p in ready)
        prefilled_prompt(settings)
        answered_prompt(settings)
        st.tabs(["first", "second"])

    import secrets

    app = AppTest.from_function(page, default_timeout=180)
    app.session_state["prompt"] = f"Name a colour, {secrets.token_hex(4)}."  # never computed before
    app.run()
    assert not app.exception and app.session_state["waited"] is True
    waited = [type(element).__name__ for element in app.main]
    app.run()
    assert not app.exception and app.session_state["waited"] is False
    assert [type(element).__name__ for element in app.main] == waited
