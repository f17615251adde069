"""ui.tables.fitted_table: the whole table for a wide box, a narrow view (with the whole table in an
expander) for a narrow one; which shows is CSS's choice in the browser (tests/browser/test_legibility.py)."""

from streamlit.testing.v1 import AppTest


def _page():
    import pandas as pd

    from ui.tables import fitted_table

    frame = pd.DataFrame({"step": [1, 2], "token": ["a", "b"], "probability (T=1)": [0.5, 0.25], "detail": ["x", "y"]})
    fitted_table(frame, {"step": "step", "probability (T=1)": "p"}, key="demo table", full_from=500,
                 hide_index=True, narrow_widths={"step": 50, "p": 80})


def test_the_whole_table_the_narrow_view_and_the_container_query_are_all_sent():
    app = AppTest.from_function(_page).run()
    assert not app.exception
    whole, narrow, again = (frame.value for frame in app.dataframe)
    assert list(whole.columns) == ["step", "token", "probability (T=1)", "detail"]
    assert list(narrow.columns) == ["step", "p"] and list(narrow["p"]) == [0.5, 0.25]
    assert again.equals(whole)
    assert [e.label for e in app.expander] == ["All columns"]
    (style,) = [h.proto.body for h in app.get("html")]
    assert ".st-key-fit_demo_table { container-type: inline-size; }" in style
    assert "@container (max-width: 499.98px) { .st-key-full_demo_table { display: none; } }" in style
    assert "@container (min-width: 500px) { .st-key-narrow_demo_table { display: none; } }" in style
