"""ui.when_idle in a real browser: a component whose tell never reaches the server tells again, so a page's details
never wait for ever (two components telling at once from a new tab, the frame's and a fragment's, once lost one)."""

from __future__ import annotations

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg

from tests.browser.app_page import open_page
from views import streaming

pytestmark = pytest.mark.browser


def _tells(payload, key: str) -> bool:
    if not isinstance(payload, (bytes, bytearray)):
        return False
    message = BackMsg()
    message.ParseFromString(payload)
    return message.WhichOneof("type") == "rerun_script" and any(
        state.id.endswith(key) for state in message.rerun_script.widget_states.widgets)


def test_a_tell_lost_on_the_way_is_told_again_and_the_details_come(app_url, page):
    dropped = []

    def connect(browser_side):
        server = browser_side.connect_to_server()

        def from_page(payload):
            if not dropped and _tells(payload, streaming.DETAILS):
                dropped.append(payload)  # the server never hears this tell
                return
            server.send(payload)

        browser_side.on_message(from_page)
        server.on_message(browser_side.send)

    page.route_web_socket("**/_stcore/stream", connect)
    open_page(page, app_url, "streaming", prompt="Why is the sky blue?", temperature=0)  # waits for the details
    assert len(dropped) == 1
    component = page.locator(f".st-key-{streaming.DETAILS} .when-idle")
    assert component.get_attribute("data-retold") == "1" and component.get_attribute("data-settled") == "1"
