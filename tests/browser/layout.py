"""DOM checks of what a person sees: Plotly text that overlaps or leaves its chart, tables cut on the side,
link labels cut short and headings too narrow for their words.

Each function returns a list of human-readable problems (empty when the page is legible), so a
failing test names the chart, the labels and the page it saw them on.
"""

from __future__ import annotations

import math

from playwright.sync_api import Page

from tests.browser.app_page import POLL_MS

TOLERANCE_PX = 1.5  # anti-aliasing and sub-pixel rounding, not a real overlap

# Every visible text of every Plotly chart as the four corners of its box on screen (rotated tick
# labels stay rotated rectangles), with the chart's box.
_PLOTLY_TEXTS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map((chart, index) => {
  const area = chart.querySelector('.main-svg')?.getBoundingClientRect();
  const visible = (t) => { const style = getComputedStyle(t);
    return style.display !== 'none' && style.visibility !== 'hidden' && parseFloat(style.opacity || '1') > 0
           && t.getAttribute('opacity') !== '0' && t.textContent.trim() !== '' && !t.closest('.hoverlayer'); };
  const texts = [...chart.querySelectorAll('.main-svg text')].filter(visible).map(t => {
    const box = t.getBBox(), m = t.getScreenCTM();
    const corner = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
    return {text: t.textContent, corners: [corner(box.x, box.y), corner(box.x + box.width, box.y),
            corner(box.x + box.width, box.y + box.height), corner(box.x, box.y + box.height)]};
  }).filter(t => t.corners[0][0] !== t.corners[2][0] && t.corners[0][1] !== t.corners[2][1]);
  const title = chart.querySelector('.gtitle')?.textContent || `chart ${index + 1}`;
  return {title, area: area && {left: area.left, right: area.right, top: area.top, bottom: area.bottom}, texts};
})"""

# Every dataframe's scroller: wider content than box means a column is cut (needs inner scrolling).
_TABLES = """() => [...document.querySelectorAll('[data-testid="stDataFrame"], [data-testid="stTable"], [data-testid="stHtml"]:has(table)')]
  .filter(table => table.offsetParent !== null && !table.closest('details:not([open])'))
  .map((table, index) => {
    const scroller = table.querySelector('.dvn-scroller') || table.querySelector('table')?.parentElement || table;
    const headers = [...table.querySelectorAll('th, [role="columnheader"]')].map(h => h.textContent.trim());
    return {index, headers: headers.slice(0, 6), scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth};
  })"""


def _shrunk(corners: list[list[float]]) -> list[tuple[float, float]]:
    """The box pulled in by the tolerance on every side (glyph boxes include some empty space)."""
    cx = sum(x for x, _ in corners) / 4
    cy = sum(y for _, y in corners) / 4
    def pull(x: float, y: float) -> tuple[float, float]:
        dx, dy = x - cx, y - cy
        length = math.hypot(dx, dy) or 1.0
        return x - dx / length * TOLERANCE_PX, y - dy / length * TOLERANCE_PX
    return [pull(x, y) for x, y in corners]


def _overlap(first: list[list[float]], second: list[list[float]]) -> bool:
    """Separating-axis test for two (possibly rotated) rectangles given by their corners."""
    a, b = _shrunk(first), _shrunk(second)
    for shape in (a, b):
        for i in range(2):
            (x1, y1), (x2, y2) = shape[i], shape[i + 1]
            axis = (y1 - y2, x2 - x1)
            pa = [axis[0] * x + axis[1] * y for x, y in a]
            pb = [axis[0] * x + axis[1] * y for x, y in b]
            if max(pa) <= min(pb) or max(pb) <= min(pa):
                return False
    return True


def _outside(corners: list[list[float]], area: dict) -> bool:
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    return (min(xs) < area["left"] - TOLERANCE_PX or max(xs) > area["right"] + TOLERANCE_PX
            or min(ys) < area["top"] - TOLERANCE_PX or max(ys) > area["bottom"] + TOLERANCE_PX)


def chart_text_problems(page: Page) -> list[str]:
    """Plotly text elements that overlap each other or stick out of their chart."""
    problems = []
    for chart in page.evaluate(_PLOTLY_TEXTS):
        texts, area = chart["texts"], chart["area"]
        for box in texts:
            if area and _outside(box["corners"], area):
                problems.append(f"{chart['title']!r}: label {box['text']!r} leaves the chart area")
        for i, first in enumerate(texts):
            for second in texts[i + 1:]:
                if _overlap(first["corners"], second["corners"]):
                    problems.append(f"{chart['title']!r}: labels {first['text']!r} and {second['text']!r} overlap")
    return problems


# The live figures the app draws in SVG itself (ui/live_*.js), not with Plotly.
LIVE_FIGURES = ".live-sampling, .live-attention, .live-block, .live-replay, .live-bars, .live-strip"

# Every visible text of every live figure's SVGs as the four corners of its box on screen, with its SVG's box.
_LIVE_TEXTS = """(selector) => [...document.querySelectorAll(selector)].flatMap(root =>
  [...root.querySelectorAll('svg')].filter(svg => svg.getBoundingClientRect().width > 0).map(chart => {
    const a = chart.getBoundingClientRect();
    return {figure: root.className, area: {left: a.left, right: a.right, top: a.top, bottom: a.bottom},
            page: document.documentElement.clientWidth,
            texts: [...chart.querySelectorAll('text')].filter(t => t.textContent.trim() !== '').map(t => {
              const b = t.getBoundingClientRect();
              return {text: t.textContent, corners: [[b.left, b.top], [b.right, b.top], [b.right, b.bottom], [b.left, b.bottom]]};
            })};
  }))"""


def live_figure_problems(page: Page) -> list[str]:
    """Texts of the live SVG figures that overlap each other or leave their figure, and figures wider than the page."""
    problems = []
    for chart in page.evaluate(_LIVE_TEXTS, LIVE_FIGURES):
        area, texts, name = chart["area"], chart["texts"], chart["figure"]
        if area["right"] > chart["page"] + 1:
            problems.append(f"{name}: a figure ends at {area['right']:.0f} px on a {chart['page']} px page")
        problems += [f"{name}: {t['text']!r} leaves its figure" for t in texts if _outside(t["corners"], area)]
        problems += [f"{name}: {a['text']!r} overlaps {b['text']!r}" for i, a in enumerate(texts) for b in texts[i + 1:]
                     if _overlap(a["corners"], b["corners"])]
    return problems


def table_problems(page: Page, looks: int = 4) -> list[str]:
    """Tables whose columns do not fit their box (the reader would have to scroll inside the table).

    A data grid is measured again after a pause when it overflows: one caught while it is still
    being laid out (no headers yet, a box of a few dozen pixels) is not what the reader sees."""
    for _ in range(looks - 1):
        if not _cut_tables(page):
            return []
        page.wait_for_timeout(500)
    return _cut_tables(page)


def _cut_tables(page: Page) -> list[str]:
    return [
        f"table {table['index'] + 1} {table['headers']}: {table['scrollWidth']} px of columns in a "
        f"{table['clientWidth']} px box"
        for table in page.evaluate(_TABLES)
        if table["scrollWidth"] > table["clientWidth"] + TOLERANCE_PX
    ]


# Links and metric labels, values and deltas in the main area that are clipped (Streamlit cuts each at one line
# with "…"), and headings with a word wider than the heading (the browser then breaks the word: "mod / el").
_CUT_TEXT = """() => {
  const shown = (e) => e.offsetParent !== null && !e.closest('details:not([open])');
  const main = document.querySelector('[data-testid="stMain"]');
  const links = [...main.querySelectorAll('[data-testid="stPageLink-NavLink"]')].filter(shown)
    .filter(a => [a, ...a.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
    .map(a => `link ${JSON.stringify(a.textContent.trim())} is cut at ${Math.round(a.clientWidth)} px`);
  const parts = {stMetricLabel: 'label', stMetricValue: 'value', stMetricDelta: 'delta'};
  const labels = [...main.querySelectorAll(Object.keys(parts).map(id => `[data-testid="${id}"]`).join(', '))]
    .filter(shown).filter(l => [l, ...l.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
    .map(l => `metric ${parts[l.dataset.testid]} ${JSON.stringify(l.textContent.trim())} is cut at ${Math.round(l.clientWidth)} px`);
  const probe = document.createElement('span');
  probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
  document.body.appendChild(probe);
  const words = [...main.querySelectorAll('h1, h2, h3')].filter(shown).flatMap(h => {
    const style = getComputedStyle(h);
    probe.style.font = style.font;
    probe.style.letterSpacing = style.letterSpacing;
    return h.textContent.split(/\\s+/).filter(Boolean).filter(word => {
      probe.textContent = word;
      return probe.getBoundingClientRect().width > h.clientWidth + 1;
    }).map(word => `heading ${JSON.stringify(h.textContent.trim())}: ${JSON.stringify(word)} is wider than its ${Math.round(h.clientWidth)} px`);
  });
  const selects = [...main.querySelectorAll('select')].filter(shown).filter(s => s.selectedIndex >= 0).filter(s => {
    const style = getComputedStyle(s);
    probe.style.font = style.font;
    probe.textContent = s.options[s.selectedIndex].text;
    const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;  // its arrow
    return probe.getBoundingClientRect().width > room;
  }).map(s => `select ${JSON.stringify(s.options[s.selectedIndex].text)} is cut at ${Math.round(s.clientWidth)} px`);
  probe.remove();
  return [...links, ...labels, ...words, ...selects];
}"""


def cut_text_problems(page: Page) -> list[str]:
    """Link labels and metric labels, values and deltas cut short, heading words broken in two, and a live
    figure's select showing its choice cut short, in the main area."""
    return page.evaluate(_CUT_TEXT)


_VISUAL_SHOWN = """(selector) => document.querySelector('[data-testid="stMain"]')?.querySelector(selector) !== null"""


def wait_for_visual(page: Page, selector: str) -> None:
    """Until an element matching ``selector`` is in the main area: the script run can end before a component
    has drawn its SVG or a table's code has loaded (seen on a loaded machine: the layout stood still first)."""
    page.wait_for_function(_VISUAL_SHOWN, arg=selector, polling=POLL_MS)


def first_top(page: Page, selector: str) -> float | None:
    """Where the first element matching ``selector`` in the main area starts, from the top of the window."""
    return page.evaluate(
        "(selector) => { const e = document.querySelector('[data-testid=\"stMain\"]').querySelector(selector);"
        " return e ? e.getBoundingClientRect().top : null; }",
        selector,
    )
