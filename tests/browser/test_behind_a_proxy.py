"""The app behind a proxy that serves it under a prefix, as Streamlit Community Cloud serves an app's frame at /~/+/:
a page's own address opens in the frame, the page talks to the server through the prefix only (its health check,
its websocket, its scripts), and a sidebar link keeps the prefix. The proxy strips the prefix before the app, so the
app sees the addresses it serves itself (ui/deep_links.py)."""

from __future__ import annotations

import asyncio
import re
import threading

import aiohttp
from aiohttp import web
from playwright.sync_api import expect

from tests.browser.app_page import EXCEPTION, open_page, wait_idle

PREFIX = "/~/+"
PROMPT = "Why do cats purr? Answer briefly."
# Headers a proxy passes on as they are (aiohttp's client undoes any content encoding itself).
PASSED = {"content-type", "cache-control", "location", "set-cookie", "cookie", "accept", "user-agent", "x-xsrftoken"}


class PrefixProxy:
    """An HTTP and websocket proxy on a free local port: ``{url}{PREFIX}/x`` goes to ``{upstream}/x``; anything
    else is answered 404 and listed in ``outside``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.outside: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.url = ""

    def __enter__(self) -> PrefixProxy:
        started = threading.Event()
        threading.Thread(target=self._serve, args=(started,), daemon=True).start()
        if not started.wait(30):
            raise RuntimeError("the proxy did not start")
        return self

    def __exit__(self, *_exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", PREFIX + "/{tail:.*}", self._forward)
        app.router.add_route("*", "/{tail:.*}", self._elsewhere)
        self.runner = web.AppRunner(app, shutdown_timeout=2)  # a tab still open keeps its websocket
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        started.set()
        self.loop.run_forever()

    async def _elsewhere(self, request: web.Request) -> web.Response:
        self.outside.append(str(request.rel_url))
        return web.Response(status=404)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        target = f"{self.upstream}/{request.match_info['tail']}"
        if request.query_string:
            target += f"?{request.query_string}"
        headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED}
        async with aiohttp.ClientSession() as session:
            if request.headers.get("Upgrade", "").lower() == "websocket":
                return await self._websocket(request, session, target, headers)
            async with session.request(request.method, target, headers=headers, data=await request.read(),
                                       allow_redirects=False) as reply:
                body = await reply.read()
                kept = [(k, v) for k, v in reply.headers.items() if k.lower() in PASSED]
                response = web.Response(body=body, status=reply.status)
                for name, value in kept:
                    response.headers.add(name, value)
                return response

    async def _websocket(self, request, session, target: str, headers: dict) -> web.WebSocketResponse:
        protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        browser = web.WebSocketResponse(protocols=protocols, max_msg_size=0)
        await browser.prepare(request)
        async with session.ws_connect(target.replace("http", "ws", 1), protocols=protocols, headers=headers,
                                      max_msg_size=0) as app:
            async def pump(source, sink) -> None:
                async for message in source:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        await sink.send_bytes(message.data)
                    elif message.type == aiohttp.WSMsgType.TEXT:
                        await sink.send_str(message.data)
                    else:
                        break

            legs = [asyncio.ensure_future(pump(browser, app)), asyncio.ensure_future(pump(app, browser))]
            await asyncio.wait(legs, return_when=asyncio.FIRST_COMPLETED)
            for leg in legs:
                leg.cancel()
        await browser.close()
        return browser


def test_a_page_address_behind_a_prefix_opens_in_the_frame_and_keeps_the_prefix(app_url, page):
    with PrefixProxy(app_url) as proxy:
        base = proxy.url + PREFIX
        open_page(page, base, "tokenization", prompt=PROMPT)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        main = page.get_by_test_id("stMainBlockContainer")
        expect(main.locator("h1").first).to_have_text("Tokenization")
        expect(main).to_contain_text(PROMPT)
        asked = page.evaluate("performance.getEntriesByType('resource').map(r => r.name)"
                              ".filter(n => n.endsWith('/_stcore/health'))")
        assert asked == [f"{base}/_stcore/health"]  # once, under the prefix
        # A sidebar link switches the page inside the app, and the address keeps the prefix and the prompt.
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Attention").click()
        expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/attention\?(.*&)?prompt="))
        wait_idle(page)
        expect(main.locator("h1").first).to_have_text("Attention")
        expect(page.locator(".live-attention svg").first).to_be_visible()
        expect(page.locator(EXCEPTION)).to_have_count(0)
        assert proxy.outside == []  # nothing was asked outside the prefix
        page.goto("about:blank")  # the tab's websocket closes before the proxy stops
