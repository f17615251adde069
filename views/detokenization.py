"""Detokenization and response page: token ids back to bytes and text, and the final response object."""

from ui.frame import stage_page

with stage_page("detokenization") as settings:
    pass  # the stage's lesson and views go here (computed with lifecycle, drawn with charts)
