"""Streaming page: the server-sent events of a streamed answer, with their timing."""

from ui.frame import stage_page

with stage_page("streaming") as settings:
    pass  # the stage's lesson and views go here (computed with lifecycle, drawn with charts)
