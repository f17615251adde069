"""An HTML table read as a browser shows it: each row's cells as text (entities unescaped), and every tag seen."""

from __future__ import annotations

from html.parser import HTMLParser


class TableCells(HTMLParser):
    """``rows``: the cells of every row, as text; ``tags``: every start tag met, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def read_table(body: str) -> TableCells:
    cells = TableCells()
    cells.feed(body)
    return cells
