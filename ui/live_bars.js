// Bars drawn in the browser, as rows or as columns: a page's picture that must not wait for plotly.js (a 4.7 MB
// chunk the browser only starts to load once a page holds a Plotly chart). charts/*.py build the data; the toggle
// between a chart's views (e.g. probability and log-probability) redraws here, with no script run. Every string
// is set with textContent: nothing is parsed as markup.

const GRID = "#E5E5E5", INK = "#222222", LINE = "#D55E00";
const ROW_PX = 28, BAR_PX = 20, GAP_PX = 8;
const MIN_BARS_PX = 120;  // the bars keep at least this much of a narrow column; long labels are cut instead
const COLUMNS_PX = 220;  // the plot's height in columns mode (more with presenter mode's larger font)
const MAX_COLUMN_LABEL_PX = 110;  // a column's upright label is cut to this length

// ---- the value axis: round steps, labels that never touch ----

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = [1, 2, 2.5, 5, 10].find((m) => m * power >= raw) || 10;
  return unit * power;
}

function tickLabel(value, format, step) {
  if (format === "percent") {
    const digits = Math.max(0, -Math.floor(Math.log10(step * 100) + 1e-9));
    return `${(value * 100).toFixed(digits)}%`;
  }
  const digits = step >= 1 ? 0 : Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return value.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function ticks(lo, hi, width, format, measure, spacing = 80) {
  for (let count = Math.max(2, Math.floor(width / spacing)); count >= 1; count -= 1) {
    const step = niceStep(hi - lo, count);
    const values = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) values.push(Math.abs(v) < step / 1e6 ? 0 : v);
    const labels = values.map((v) => tickLabel(v, format, step));
    const room = width / Math.max(1, values.length - 1);
    if (count === 1 || labels.every((label) => measure(label) + GAP_PX < room)) return values.map((v, i) => [v, labels[i]]);
  }
  return [];
}

// Powers of ten between lo and hi, every second (third, ...) one when their labels would touch.
function logTicks(lo, hi, length, format, size) {
  const values = [];
  for (let p = Math.ceil(Math.log10(lo) - 1e-9); p <= Math.log10(hi) + 1e-9; p += 1) values.push(10 ** p);
  const labels = values.map((v) => tickLabel(v, format, v));
  const room = length / Math.max(1, Math.log10(hi / lo));
  const every = Math.max(1, Math.ceil(Math.max(...labels.map((label) => (size(label) + GAP_PX) / room))));
  return values.map((v, i) => [v, labels[i]]).filter((_, i) => i % every === 0);
}

// The value -> pixel map of an axis from lo to hi drawn between the pixels a and b (b < a for an upward axis).
function scaler(lo, hi, a, b, scale) {
  if (scale === "log") {
    const [l, h] = [Math.log10(lo), Math.log10(hi)];
    return (v) => a + ((Math.log10(Math.max(v, lo)) - l) / (h - l || 1)) * (b - a);
  }
  return (v) => a + ((v - lo) / (hi - lo || 1)) * (b - a);
}

// A log axis: from a fifth of a decade under the smallest value (a bar of 1 still shows) to a little over the top.
function logExtent(view) {
  const values = view.rows.flatMap((r) => r.segments.map((s) => s.value));
  if (view.line) values.push(view.line.at);
  const lo = Math.min(...values), hi = Math.max(...values);
  return [10 ** (Math.floor(Math.log10(lo) + 1e-9) - 0.2), 10 ** (Math.log10(hi) + 0.15)];
}

// ---- one view: rows of segments against a value axis ----

function extent(view, stacked) {
  let lo = 0, hi = 0;
  for (const row of view.rows) {
    const values = row.segments.map((s) => s.value);
    const sums = stacked ? [values.reduce((a, b) => a + b, 0)] : values;
    lo = Math.min(lo, ...sums);
    hi = Math.max(hi, ...sums);
  }
  if (view.line) hi = Math.max(hi, view.line.at);
  const pad = (hi - lo || 1) * 0.04;
  return [lo < 0 ? lo - pad : 0, hi > 0 ? hi + (view.line ? pad : (hi - lo) * 0.2) : 0];
}

function draw(state) {
  const { root, data } = state;
  const view = data.views[state.view];
  state.width = Math.floor(root.clientWidth);
  if (state.width < MIN_BARS_PX) return;  // not laid out yet (or hidden): the ResizeObserver draws it once it is
  state.root.dataset.shown = view.name;
  if (data.orientation === "columns") return drawColumns(state, view);
  const font = fontSize() * 0.8;
  const measure = measurer(root, font);
  const stacked = data.mode === "stack";
  const grouped = !stacked && data.series.length > 1;
  const labelWidth = Math.min(Math.max(0, ...view.rows.map((r) => measure(r.label))) + GAP_PX,
                              Math.max(0, state.width - MIN_BARS_PX));
  // Room for the value printed past a bar's end: on the right of positive bars, on the left of negative ones.
  const valueRoom = stacked ? 0 : Math.max(0, ...view.rows.flatMap((r) => r.segments.map((s) => measure(s.text || "")))) + GAP_PX;
  const [lo, hi] = extent(view, stacked);
  const left = labelWidth + (lo < 0 ? valueRoom : 0), right = state.width - (hi > 0 ? valueRoom : 0) - GAP_PX;
  // Heights follow the font (presenter mode's is larger): the line's label above the rows, the axis under them.
  const top = view.line ? Math.ceil(1.6 * font) : 4;
  const rowPx = Math.max(ROW_PX, Math.ceil(1.7 * font)), axisPx = Math.ceil(2 * font + 28);
  const legendRowPx = Math.ceil(1.7 * font);
  const rowsHeight = view.rows.length * rowPx;
  const legendRows = data.legend ? legendLayout(data.series, state.width, measure) : [];
  const height = top + rowsHeight + axisPx + legendRows.length * legendRowPx;

  state.chart.replaceChildren();
  state.chart.setAttribute("width", state.width);
  state.chart.setAttribute("height", height);
  state.chart.setAttribute("viewBox", `0 0 ${state.width} ${height}`);
  const x = (v) => left + ((v - lo) / (hi - lo || 1)) * (right - left);

  for (const [value, label] of ticks(lo, hi, right - left, view.format, measure)) {
    svg("line", { x1: x(value), x2: x(value), y1: top, y2: top + rowsHeight, stroke: GRID }, state.chart);
    text("text", { x: x(value), y: top + rowsHeight + font + 4, "text-anchor": "middle", "font-size": font, class: "lb-tick" },
         label, state.chart);
  }
  svg("line", { x1: x(0), x2: x(0), y1: top, y2: top + rowsHeight, stroke: "#888888" }, state.chart);
  text("text", { x: (left + right) / 2, y: top + rowsHeight + 2 * font + 14, "text-anchor": "middle", "font-size": font,
                 class: "lb-axis" }, view.axis, state.chart);

  view.rows.forEach((row, index) => drawRow(state, row, top + index * rowPx, { x, font, measure, stacked, grouped, labelWidth, rowPx }));
  if (view.line) drawLine(state, view.line, x(view.line.at), top, rowsHeight, font, measure);
  drawLegend(state, legendRows, top + rowsHeight + axisPx, font, legendRowPx);
}

function drawRow(state, row, y, { x, font, measure, stacked, grouped, labelWidth, rowPx }) {
  const group = svg("g", { "data-row": row.label }, state.chart);
  if (row.title) text("title", {}, row.title, group);
  text("text", { x: labelWidth - GAP_PX, y: y + rowPx / 2 + font * 0.35, "text-anchor": "end", "font-size": font, class: "lb-label" },
       cutToFit(row.label, labelWidth - GAP_PX, measure), group);
  const thick = grouped ? BAR_PX / row.segments.length : BAR_PX;
  let from = 0;
  row.segments.forEach((segment, index) => {
    const start = stacked ? from : 0, end = start + segment.value;
    from = end;
    const barTop = y + (rowPx - BAR_PX) / 2 + (grouped ? index * thick : 0);
    const [a, b] = [x(Math.min(start, end)), x(Math.max(start, end))];
    const colour = state.data.series[segment.series].colour;
    const bar = svg("rect", { x: a, y: barTop, width: Math.max(b - a, segment.value ? 1 : 0), height: thick, fill: colour,
                              stroke: stacked ? "#FFFFFF" : "none", "data-value": segment.value }, group);
    if (segment.title) text("title", {}, segment.title, bar);
    if (!segment.text) return;
    const width = measure(segment.text);
    const middle = barTop + thick / 2 + font * 0.35;
    if (stacked) {  // inside its segment, or not at all (as Plotly's uniformtext "hide")
      if (width + 6 <= b - a) {
        text("text", { x: (a + b) / 2, y: middle, "text-anchor": "middle", "font-size": font, class: "lb-inside" },
             segment.text, group);
      }
    } else if (segment.value < 0) {
      text("text", { x: a - 4, y: middle, "text-anchor": "end", "font-size": font, class: "lb-value" }, segment.text, group);
    } else {
      text("text", { x: b + 4, y: middle, "text-anchor": "start", "font-size": font, class: "lb-value" }, segment.text, group);
    }
  });
}

function drawLine(state, line, at, top, rowsHeight, font, measure) {
  svg("line", { x1: at, x2: at, y1: top - 4, y2: top + rowsHeight, stroke: LINE, "stroke-width": 3, "stroke-dasharray": "7 5" },
      state.chart);
  // The label sits above the rows, right-aligned to the line while it fits on its left.
  const width = measure(line.label);
  const anchor = at - width - 4 >= 0 ? "end" : "start";
  text("text", { x: anchor === "end" ? at - 4 : at + 4, y: top - 0.5 * font, "text-anchor": anchor, "font-size": font, fill: LINE,
                 class: "lb-line" }, line.label, state.chart);
}

// ---- one view as columns: a category axis along the bottom, upright labels, the values upward ----

function drawColumns(state, view) {
  const { data } = state;
  const font = fontSize() * 0.8;
  const measure = measurer(state.root, font);
  const grouped = data.mode !== "stack" && Math.max(...view.rows.map((r) => r.segments.length)) > 1;
  const log = view.scale === "log";
  const count = Math.max(1, view.rows.length);
  const [lo, hi] = log ? logExtent(view) : extent(view, data.mode === "stack");
  const legendRowPx = Math.ceil(1.7 * font);
  const legendRows = data.legend ? legendLayout(data.series, state.width, measure) : [];
  const plotPx = Math.max(COLUMNS_PX, Math.ceil(14 * font));
  // The value axis on the left: its title upright, then the tick labels.
  const tickLabels = log ? logTicks(lo, hi, plotPx, view.format, () => font)
    : ticks(lo, hi, plotPx, view.format, () => font, 3 * font);
  const left = Math.ceil(1.6 * font) + Math.max(0, ...tickLabels.map(([, label]) => measure(label))) + GAP_PX;
  const right = state.width - GAP_PX;
  const pitch = (right - left) / count;
  // A column's value over it: level when it fits the column, else upright (the top keeps room for the longest).
  const texts = view.rows.flatMap((r) => r.segments.map((s) => s.text || ""));
  const longest = Math.max(0, ...texts.map(measure));
  const upright = !grouped && longest + 2 > pitch;
  const lineRoom = view.line ? Math.ceil(1.6 * font) : 4;  // the line's label, over everything else
  const top = lineRoom + (grouped || !longest ? 0 : (upright ? longest : font) + 6);
  const labelPx = Math.min(MAX_COLUMN_LABEL_PX, Math.max(0, ...view.rows.map((r) => measure(r.label)))) + GAP_PX;
  const every = Math.max(1, Math.ceil((font * 1.3) / pitch));  // upright labels one font height apart at least
  const bottom = top + plotPx;
  const height = bottom + labelPx + Math.ceil(1.6 * font) + 8 + legendRows.length * legendRowPx;

  state.chart.replaceChildren();
  state.chart.setAttribute("width", state.width);
  state.chart.setAttribute("height", height);
  state.chart.setAttribute("viewBox", `0 0 ${state.width} ${height}`);
  const y = scaler(lo, hi, bottom, top, view.scale);

  for (const [value, label] of tickLabels) {
    svg("line", { x1: left, x2: right, y1: y(value), y2: y(value), stroke: GRID }, state.chart);
    text("text", { x: left - 4, y: y(value) + font * 0.35, "text-anchor": "end", "font-size": font, class: "lb-tick" },
         label, state.chart);
  }
  svg("line", { x1: left, x2: right, y1: bottom, y2: bottom, stroke: "#888888" }, state.chart);
  const middle = (top + bottom) / 2;
  text("text", { x: font, y: middle, "text-anchor": "middle", "font-size": font, class: "lb-axis",
                 transform: `rotate(-90 ${font} ${middle})` }, cutToFit(view.axis, plotPx, measure), state.chart);
  if (data.category) {
    text("text", { x: (left + right) / 2, y: bottom + labelPx + font + 4, "text-anchor": "middle", "font-size": font,
                   class: "lb-axis" }, data.category, state.chart);
  }
  const base = log ? lo : 0;
  let lastText = -Infinity;  // upright values one font height apart at least: a run of narrow columns keeps some
  view.rows.forEach((row, index) => {
    const group = svg("g", { "data-row": row.label }, state.chart);
    const x0 = left + index * pitch, width = pitch * 0.8, thick = grouped ? width / row.segments.length : width;
    // The whole column answers the pointer: a forced token's bar is a few pixels tall.
    const hit = svg("rect", { x: x0, y: top, width: pitch, height: plotPx, fill: "transparent" }, group);
    if (row.title) text("title", {}, row.title, hit);
    let from = base;
    row.segments.forEach((segment, part) => {
      const start = data.mode === "stack" ? from : base, end = data.mode === "stack" ? from + segment.value : segment.value;
      from = end;
      const a = x0 + pitch * 0.1 + (grouped ? part * thick : 0);
      const [upper, lower] = [y(Math.max(start, end)), y(Math.min(start, end))];
      const bar = svg("rect", { x: a, y: upper, width: thick, height: Math.max(lower - upper, segment.value ? 1 : 0),
                                fill: data.series[segment.series].colour, "data-value": segment.value }, group);
      if (segment.title) text("title", {}, segment.title, bar);
      if (!segment.text || grouped) return;
      const cx = a + thick / 2;
      if (upright) {
        if (cx - lastText < font * 1.1) return;
        lastText = cx;
        text("text", { x: cx + font * 0.35, y: upper - 4, "text-anchor": "start", "font-size": font, class: "lb-value",
                       transform: `rotate(-90 ${cx + font * 0.35} ${upper - 4})` }, segment.text, group);
      } else {
        text("text", { x: cx, y: upper - 4, "text-anchor": "middle", "font-size": font, class: "lb-value" }, segment.text, group);
      }
    });
    if (index % every) return;
    const cx = x0 + pitch / 2 + font * 0.35, ly = bottom + 4;
    text("text", { x: cx, y: ly, "text-anchor": "end", "font-size": font, class: "lb-label", transform: `rotate(-90 ${cx} ${ly})` },
         cutToFit(row.label, MAX_COLUMN_LABEL_PX, measure), group);
  });
  if (view.line) {
    const at = y(view.line.at);
    svg("line", { x1: left, x2: right, y1: at, y2: at, stroke: LINE, "stroke-width": 2, "stroke-dasharray": "7 5" }, state.chart);
    text("text", { x: right, y: lineRoom - 0.4 * font, "text-anchor": "end", "font-size": font, fill: LINE, class: "lb-line" },
         view.line.label, state.chart);
  }
  drawLegend(state, legendRows, bottom + labelPx + Math.ceil(1.6 * font) + 8, font, legendRowPx);
}

// The legend's entries in rows that fit the width: a swatch, then the name.
function legendLayout(series, width, measure) {
  const rows = [[]];
  let used = 0;
  for (const entry of series) {
    const wide = 16 + measure(entry.name) + 16;
    if (used + wide > width && rows[rows.length - 1].length) { rows.push([]); used = 0; }
    rows[rows.length - 1].push({ ...entry, at: used });
    used += wide;
  }
  return rows;
}

function drawLegend(state, rows, y, font, rowPx) {
  rows.forEach((row, index) => {
    const top = y + index * rowPx;
    for (const entry of row) {
      svg("rect", { x: entry.at, y: top + 4, width: 12, height: 12, fill: entry.colour }, state.chart);
      text("text", { x: entry.at + 16, y: top + 4 + font * 0.85, "font-size": font, class: "lb-legend" }, entry.name, state.chart);
    }
  });
}

// ---- the toggle between views ----

function buildToggle(state) {
  const bar = element("div", { class: "lb-views", role: "radiogroup", "aria-label": state.data.toggle || "Show" }, state.root);
  if (state.data.toggle) text("span", { class: "lb-toggle-label" }, state.data.toggle, bar, null);
  state.buttons = state.data.views.map((view, index) => {
    const button = text("button", { type: "button", role: "radio", "data-view": view.name }, view.name, bar, null);
    button.addEventListener("click", () => {
      state.view = index;
      mark(state);
      draw(state);
      countDraw(state.root);
    });
    return button;
  });
  mark(state);
}

// For the browser tests and the bench: how many redraws a control made, and when the last one reached the screen.
function countDraw(root) {
  requestAnimationFrame(() => {
    root.dataset.controlDrawnAt = String(performance.now());
    root.dataset.controlDraws = String(Number(root.dataset.controlDraws || 0) + 1);
  });
}

function mark(state) {
  state.buttons.forEach((button, index) => button.setAttribute("aria-checked", String(index === state.view)));
}

export default function (component) {
  const { data, parentElement } = component;
  let root = parentElement.querySelector(":scope > .live-bars");
  if (root && JSON.stringify(root.liveData) === JSON.stringify(data)) return;  // a rerun with the same data
  const view = root && root.liveState ? Math.min(root.liveState.view, data.views.length - 1) : 0;
  if (root) root.remove();
  root = element("div", { class: "live-bars" }, parentElement);
  const state = { root, data, view, width: 0 };
  root.liveState = state;
  root.liveData = data;  // for the browser tests
  if (data.views.length > 1) buildToggle(state);
  state.chart = svg("svg", { role: "img", "aria-label": data.label || "" }, root);
  draw(state);
  new ResizeObserver(() => {
    if (Math.floor(root.clientWidth) !== state.width) draw(state);
  }).observe(root);
}
