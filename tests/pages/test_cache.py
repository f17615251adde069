"""The per-prompt cache: keyed by the settings, bounded in entries."""

from streamlit.testing.v1 import AppTest


def _page():
    from ui.cache import MAX_ENTRIES, per_prompt_cache
    from ui.settings import JourneySettings
    import streamlit as st

    calls = st.session_state.setdefault("calls", [])

    @per_prompt_cache
    def length(settings, _unhashable):
        calls.append(settings.prompt)
        return len(settings.prompt)

    length(JourneySettings(prompt="abc"), object())
    length(JourneySettings(prompt="abc"), object())  # same settings: a cache hit
    length(JourneySettings(prompt="abcd", temperature=0.1), object())
    for n in range(MAX_ENTRIES + 1):
        length(JourneySettings(prompt=str(n)), object())
    length(JourneySettings(prompt="abc"), object())  # evicted by the bound: computed again
    st.write(len(calls))


def test_equal_settings_hit_the_cache_and_the_cache_is_bounded():
    from ui.cache import MAX_ENTRIES

    app = AppTest.from_function(_page).run()
    assert not app.exception
    assert app.session_state["calls"][:2] == ["abc", "abcd"]
    assert len(app.session_state["calls"]) == 2 + MAX_ENTRIES + 1 + 1


def test_cached_journey_runs_the_sidebar_settings_once_per_prompt(loaded):
    def page():
        from ui.cache import cached_journey
        from ui.settings import JourneySettings

        settings = JourneySettings(prompt="Say hi.", temperature=0.0, max_tokens=3, system_prompt="Be brief.")
        first, second = cached_journey(settings), cached_journey(settings)
        import streamlit as st

        st.session_state["same"] = first is second
        st.session_state["journey"] = first

    app = AppTest.from_function(page, default_timeout=180).run()
    assert not app.exception
    journey = app.session_state["journey"]
    assert app.session_state["same"] is True
    assert journey.input.prompt == "Say hi." and journey.input.system == "Be brief."
    assert journey.input.sampling.temperature == 0.0 and journey.generation.completion_tokens <= 3
    assert "Say hi." in journey.rendered.text and "Be brief." in journey.rendered.text
