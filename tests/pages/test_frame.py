"""The frame: navigation, the shared settings carried between pages and in the URL, error messages."""

import pytest

from tests.pages.harness import EVERY_PAGE_PROMPT, components, details_drawn, markdowns, open_page, texts
from ui.frame import MORE_LESSON, SETTINGS_LATER, split_lesson
from ui.settings import DEFAULT_PROMPT, NUMBERS, parse_history, url_settings
from ui.stages import PHASES, STAGES
from lifecycle.errors import LifecycleError
from lifecycle.journey import MAX_PROMPT_CHARS


def test_home_renders_the_map_with_a_link_to_every_stage(run_page):
    app = run_page()
    assert not app.exception
    titles = {page.title for page in STAGES}
    links = [link for link in app.get("page_link") if link.proto.label in titles]  # the map, not Next/replay
    assert [link.proto.page for link in links] == [page.url_path for page in STAGES]
    assert [s.value for s in app.subheader][: len(PHASES)] == list(PHASES)
    assert DEFAULT_PROMPT in texts(app)
    model_line = next(c.value for c in app.caption if c.value.startswith("Model: "))
    assert "30 layers" in model_line and "49,152 tokens" in model_line




@pytest.mark.parametrize("page", STAGES, ids=[p.url_path for p in STAGES])
def test_every_stage_page_runs_and_shows_the_prompt(run_page, page):
    app = run_page(page.url_path, prompt=EVERY_PAGE_PROMPT)
    assert not app.exception
    assert app.title[0].value == page.title
    assert EVERY_PAGE_PROMPT in texts(app)
    assert not app.error


def test_prompt_typed_in_the_sidebar_carries_to_the_next_page(run_page):
    app = run_page("tokenization")
    app.sidebar.text_area(key="prompt").set_value("Bonjour, comment ça va ?").run()
    app.sidebar.slider(key="temperature").set_value(0.0).run()
    open_page(app, "sampling").run()
    assert not app.exception
    assert app.title[0].value == "Sampling"
    assert "Bonjour, comment ça va ?" in texts(app)
    assert app.sidebar.slider(key="temperature").value == 0.0


def test_deep_link_sets_every_sidebar_setting(run_page):
    app = run_page(
        "generation", prompt="Count to three.", system_prompt="Be brief.", history="user: hi\nassistant: hello",
        temperature=0.3, top_p=0.9, top_k=40, min_p=0.05, repetition_penalty=1.1, max_tokens=12, seed=7,
        include_usage=False,
    )
    assert not app.exception
    state = app.session_state
    assert (state["temperature"], state["top_p"], state["top_k"], state["min_p"]) == (0.3, 0.9, 40, 0.05)
    assert (state["repetition_penalty"], state["max_tokens"], state["seed"]) == (1.1, 12, 7)
    assert state["include_usage"] is False
    assert state["system_prompt"] == "Be brief." and "Count to three." in texts(app)


# Links as a user may paste them: every setting set, values the widgets cannot take, edge spellings.
LINKS = {
    "every setting": {"prompt": "Count to three.", "system_prompt": "Be brief.", "history": "user: hi\nassistant: hello",
                      "temperature": "0.3", "top_p": "0.9", "top_k": "40", "min_p": "0.05",
                      "repetition_penalty": "1.1", "max_tokens": "12", "seed": "7", "include_usage": "false"},
    "unusable values": {"prompt": "", "temperature": "9", "top_k": "many", "max_tokens": "0", "min_p": "nan",
                        "top_p": "-1", "include_usage": "maybe"},
    "edge spellings": {"prompt": "x" * (MAX_PROMPT_CHARS + 5), "top_p": "1e-1", "temperature": "2",
                       "repetition_penalty": "0.50", "seed": "0", "max_tokens": "12.0", "include_usage": "TRUE"},
}


@pytest.mark.parametrize("link", LINKS.values(), ids=LINKS)
def test_a_new_tabs_first_run_reads_the_link_as_the_widgets_then_take_it(run_page, link):
    """A new tab's first run draws no settings widgets and reads the link itself (ui.settings.url_settings); the
    Failures page has no details of its own, so the frame asks the browser for the run that draws them."""
    app = run_page("failures", drawn=False, **link)
    assert not app.exception and not app.sidebar.text_area and not app.sidebar.slider
    expected = url_settings(link)
    assert expected["prompt"][:40] in " ".join(texts(app))
    app = details_drawn(app)
    assert not app.exception and len(app.sidebar.slider) == 4 and len(app.sidebar.text_area) == 3
    assert {key: app.session_state[key] for key in expected} == expected
    assert {key: type(app.session_state[key]) for key in expected} == {key: type(v) for key, v in expected.items()}


@pytest.mark.parametrize(("url_path", "frame_asks"), [("tokenization", False), ("gateway", False), ("sampling", True),
                                                      ("failures", True)])
def test_a_new_tab_asks_once_for_the_run_that_draws_the_settings(run_page, url_path, frame_asks):
    """Tokenization's and Gateway's details come in the page's next run, which draws the widgets too; Sampling's come
    in its what-if fragment's run, which would not, and Failures has none: the frame asks for the run itself."""
    app = run_page(url_path, drawn=False)
    assert not app.exception and not app.sidebar.slider
    assert bool(components(app, SETTINGS_LATER)) == frame_asks
    app = details_drawn(app)
    assert not app.exception and len(app.sidebar.slider) == 4
    assert not components(app, SETTINGS_LATER)


def test_a_page_switch_before_the_widgets_are_drawn_keeps_the_links_settings(run_page):
    """A click (or presenter mode's arrow key) in a new tab before its second run: the frontend drops the URL's
    parameters, as no widget is bound to them yet; the next page still follows the link's settings."""
    app = run_page("tokenization", drawn=False, prompt="Why do cats purr?", temperature=0.2)
    assert not app.sidebar.text_area
    app.query_params.clear()  # what the frontend sends with the switch
    open_page(app, "sampling").run()
    assert not app.exception and app.title[0].value == "Sampling"
    assert app.sidebar.text_area(key="prompt").value == "Why do cats purr?" and "Why do cats purr?" in texts(app)
    assert app.sidebar.slider(key="temperature").value == 0.2
    assert app.query_params == {"prompt": "Why do cats purr?", "temperature": "0.2"}


def test_out_of_range_url_values_fall_back_with_a_message(run_page):
    app = run_page("sampling", temperature=9, top_k="many", max_tokens=0)
    assert not app.exception
    warnings = " ".join(w.value for w in app.warning)
    assert "temperature='9'" in warnings and "top_k='many'" in warnings and "max_tokens='0'" in warnings
    assert app.sidebar.slider(key="temperature").value == NUMBERS["temperature"].default
    assert app.sidebar.number_input(key="max_tokens").value == NUMBERS["max_tokens"].default


def test_a_links_problems_stay_for_the_visit_and_leave_with_the_page(run_page):
    """The Generation page's details come in a second run (ui.when_idle), whose URL the sidebar has already
    mended: the link's message must still be there, and gone once another page is opened."""
    app = run_page("generation", temperature=9, max_tokens=4)
    assert not app.exception
    assert "temperature='9'" in " ".join(w.value for w in app.warning)
    assert app.get("plotly_chart"), "the details' run must have run"
    open_page(app, "tokenization").run()
    assert not app.exception and app.title[0].value == "Tokenization"
    assert "temperature='9'" not in " ".join(w.value for w in app.warning)


def test_a_page_switch_that_lost_the_query_puts_the_settings_back_in_the_url(run_page):
    """The browser suite once saw the sidebar's page switch arrive without the query (the widgets kept
    their values, the URL stayed bare for good): the next page's run writes them back."""
    app = run_page("tokenization", prompt="Why do cats purr?", temperature=0.2)
    assert app.query_params == {"prompt": "Why do cats purr?", "temperature": "0.2"}
    app.query_params.clear()  # what the frontend sent with the switch
    open_page(app, "sampling").run()
    assert not app.exception and app.title[0].value == "Sampling"
    assert app.query_params == {"prompt": "Why do cats purr?", "temperature": "0.2"}  # defaults stay out
    assert app.sidebar.slider(key="temperature").value == 0.2 and "Why do cats purr?" in texts(app)


def test_a_link_prompt_over_the_journeys_limit_is_cut_to_it_with_a_message(run_page):
    app = run_page("tokenization", prompt="word " * (MAX_PROMPT_CHARS // 5) + "x")
    assert not app.exception
    assert f"longer than {MAX_PROMPT_CHARS:,} characters" in app.warning[0].value
    box = app.sidebar.text_area(key="prompt")
    assert box.proto.max_chars == MAX_PROMPT_CHARS and len(box.value) == MAX_PROMPT_CHARS
    assert not app.error  # the cut prompt is one the journey takes


def test_unreadable_history_is_a_message_not_a_traceback(run_page):
    app = run_page("request", history="this line has no role")
    assert not app.exception
    assert "history line 1" in app.error[0].value


def test_empty_prompt_is_a_warning_on_stage_pages(run_page):
    app = run_page("tokenization", prompt="")
    assert not app.exception
    assert "prompt is empty" in app.warning[0].value


def test_html_in_the_prompt_is_shown_as_literal_text(run_page):
    hostile = '<img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3))'
    app = run_page("tokenization", prompt=hostile)
    assert not app.exception
    assert hostile in texts(app)
    assert not any("onerror" in m for m in markdowns(app))


def test_history_parsing_keeps_roles_and_multiline_turns():
    turns = parse_history("User: hi\nthere\nassistant:  hello\n\nuser: again")
    assert turns == (("user", "hi\nthere"), ("assistant", "hello"), ("user", "again"))
    with pytest.raises(LifecycleError) as error:
        parse_history("\nsystem: nope")
    assert error.value.param == "history"


def test_a_lesson_keeps_two_sentences_on_screen_and_folds_the_rest_under_them(run_page):
    app = run_page("next-token", prompt="Why is the sky blue?", temperature=0, max_tokens=2)
    main = list(app.main.children.values())
    at = next(i for i, e in enumerate(main) if e.type == "markdown" and "most likely next token" in e.value)
    short, more = main[at].value, main[at + 1]
    assert more.type == "expander" and more.label == MORE_LESSON
    rest = " ".join(m.value for m in more.markdown)
    assert short.startswith("The most likely next token is") and "After reading all" in short
    assert "The entropy is" in rest and "The entropy is" not in short
    assert markdowns(app)[1] == f"{short} {rest}"  # nothing lost: the lesson as the page built it


@pytest.mark.parametrize(("lesson", "normal", "presenter"), [
    ("A **3.0** here. Two. Three.", ("A **3.0** here. Two.", "Three."), ("A **3.0** here. Two.", "Three.")),
    ("One. Two.", ("One. Two.", ""), ("One.", "Two.")),
    ("Only one.", ("Only one.", ""), ("Only one.", "")),
    ("A. " + "Long " * 60 + "second. Third.", ("A. " + "Long " * 60 + "second.", "Third."),
     ("A.", "Long " * 60 + "second. Third.")),
])
def test_a_lesson_splits_after_two_sentences_and_in_presenter_mode_after_a_short_first(lesson, normal, presenter):
    assert split_lesson(lesson, present=False) == normal
    assert split_lesson(lesson, present=True) == presenter
