"""The sentences the pages state as their lessons: one module per page, named like its view
(lifecycle/lessons/next_token.py for views/next_token.py), and the wording they share (words).

Each function takes the run's numbers (short strings, small dataclasses of lifecycle/) and returns
the Markdown that holds for them, saying what does hold where the usual lesson does not. They are
pure (no Streamlit, no Plotly), so tests can put numbers on both sides of each threshold. Text a
visitor or the model wrote comes in already quoted by the page (ui.text.quoted), never raw.
"""
