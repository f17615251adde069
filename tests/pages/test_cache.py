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
