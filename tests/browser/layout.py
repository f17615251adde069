"""DOM checks of what a person sees: Plotly text that overlaps or leaves its chart, tables cut on the side.

Each function returns a list of human-readable problems (empty when the page is legible), so a
failing test names the chart, the labels and the page it saw them on.
"""

from __future__ import annotations

from playwright.sync_api import Page

TOLERANCE_PX = 1.5  # anti-aliasing and sub-pixel rounding, not a real overlap

# Every visible text of every Plotly chart, with its box and the chart's box (page coordinates).
_PLOTLY_TEXTS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map((chart, index) => {
  const area = chart.querySelector('.main-svg')?.getBoundingClientRect();
  const texts = [...chart.querySelectorAll('.main-svg text')]
    .filter(t => !t.closest('.hoverlayer') && t.textContent.trim() !== '')
    .filter(t => getComputedStyle(t).display !== 'none' && getComputedStyle(t).visibility !== 'hidden'
                 && parseFloat(getComputedStyle(t).opacity || '1') > 0 && t.getAttribute('opacity') !== '0')
    .map(t => { const r = t.getBoundingClientRect();
                return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })
    .filter(r => r.right - r.left > 0 && r.bottom - r.top > 0);
  const title = chart.querySelector('.gtitle')?.textContent || `chart ${index + 1}`;
  return {title, area: area && {left: area.left, right: area.right, top: area.top, bottom: area.bottom}, texts};
})"""

# Every dataframe's scroller: wider content than box means a column is cut (needs inner scrolling).
_TABLES = """() => [...document.querySelectorAll('[data-testid="stDataFrame"], [data-testid="stTable"]')]
  .filter(table => table.offsetParent !== null)
  .map((table, index) => {
    const scroller = table.querySelector('.dvn-scroller') || table.querySelector('table')?.parentElement || table;
    const headers = [...table.querySelectorAll('th, [role="columnheader"]')].map(h => h.textContent.trim());
    return {index, headers: headers.slice(0, 6), scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth};
  })"""


def _overlap(a: dict, b: dict) -> bool:
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]) > TOLERANCE_PX
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > TOLERANCE_PX)


def _outside(box: dict, area: dict) -> bool:
    return (box["left"] < area["left"] - TOLERANCE_PX or box["right"] > area["right"] + TOLERANCE_PX
            or box["top"] < area["top"] - TOLERANCE_PX or box["bottom"] > area["bottom"] + TOLERANCE_PX)


def chart_text_problems(page: Page) -> list[str]:
    """Plotly text elements that overlap each other or stick out of their chart."""
    problems = []
    for chart in page.evaluate(_PLOTLY_TEXTS):
        texts, area = chart["texts"], chart["area"]
        for box in texts:
            if area and _outside(box, area):
                problems.append(f"{chart['title']!r}: label {box['text']!r} leaves the chart area")
        for i, first in enumerate(texts):
            for second in texts[i + 1:]:
                if _overlap(first, second):
                    problems.append(f"{chart['title']!r}: labels {first['text']!r} and {second['text']!r} overlap")
    return problems


def table_problems(page: Page) -> list[str]:
    """Tables whose columns do not fit their box (the reader would have to scroll inside the table)."""
    return [
        f"table {table['index'] + 1} {table['headers']}: {table['scrollWidth']} px of columns in a "
        f"{table['clientWidth']} px box"
        for table in page.evaluate(_TABLES)
        if table["scrollWidth"] > table["clientWidth"] + TOLERANCE_PX
    ]


def first_chart_top(page: Page) -> float | None:
    """Where the page's first Plotly chart starts, from the top of the window (None: no chart)."""
    return page.evaluate(
        "() => { const c = document.querySelector('[data-testid=\"stPlotlyChart\"]');"
        " return c ? c.getBoundingClientRect().top : null; }"
    )
