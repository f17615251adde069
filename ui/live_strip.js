// The Embeddings page's strip drawn in the browser: each token's input vector as a row of coloured cells.
// charts/embeddings.py sends every dimension once (float16, base64); the "Dimensions shown" slider redraws here
// with no script run, and hovering a cell names its token, dimension and value. The cells are one pixel each
// on a canvas, scaled into the SVG; every string is set with textContent: nothing is parsed as markup.

const GRID = "#888888";
const BAR_PX = 14, GAP_PX = 8, MIN_ROW_PX = 6, MAX_ROW_PX = 20, ROWS_PX = 640;

// IEEE 754 half precision, as numpy's float16 writes it (little-endian).
function halfToFloat(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

function decode(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const values = new Float32Array(bytes.length / 2);
  for (let i = 0; i < values.length; i += 1) values[i] = halfToFloat(view.getUint16(2 * i, true));
  return values;
}

// The diverging scale, linear in RGB between its stops (as Plotly interpolates it).
function colour(scale, at) {
  const t = Math.max(0, Math.min(1, at));
  for (let i = 1; i < scale.length; i += 1) {
    const [p0, c0] = scale[i - 1], [p1, c1] = scale[i];
    if (t <= p1) {
      const f = (t - p0) / (p1 - p0 || 1);
      return c0.map((v, k) => Math.round(v + f * (c1[k] - v)));
    }
  }
  return scale[scale.length - 1][1];
}

const cell = (state, row, dim) => state.values[row * state.data.dims + dim];

function limitOf(state, shown) {
  let limit = 0;
  for (let row = 0; row < state.data.labels.length; row += 1) {
    for (let dim = 0; dim < shown; dim += 1) limit = Math.max(limit, Math.abs(cell(state, row, dim)));
  }
  return limit || 1;
}

function cellsImage(state, shown, limit) {
  const rows = state.data.labels.length;
  const canvas = document.createElement("canvas");
  canvas.width = shown;
  canvas.height = rows;
  const context = canvas.getContext("2d");
  const image = context.createImageData(shown, rows);
  for (let row = 0; row < rows; row += 1) {
    for (let dim = 0; dim < shown; dim += 1) {
      const [r, g, b] = colour(state.data.scale, (cell(state, row, dim) / limit + 1) / 2);
      const at = 4 * (row * shown + dim);
      image.data.set([r, g, b, 255], at);
    }
  }
  context.putImageData(image, 0, 0);
  return canvas.toDataURL();
}

function axisTicks(shown, width, measure) {
  for (const step of [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]) {
    const values = [];
    for (let v = 0; v < shown; v += step) values.push(v);
    if (values.every((v) => measure(String(v)) + GAP_PX < (width / shown) * step)) return values;
  }
  return [0];
}

function draw(state, byControl = false) {
  const { root, data } = state;
  state.width = Math.floor(root.clientWidth);
  if (state.width < 200) return;  // not laid out yet (or hidden): the ResizeObserver draws it once it is
  const shown = Number(state.slider.value);
  state.output.textContent = `${shown} of ${data.dims}`;
  const font = fontSize() * 0.8;
  const measure = measurer(root, font);
  const rows = data.labels.length;
  const rowPx = Math.max(MIN_ROW_PX, Math.min(MAX_ROW_PX, ROWS_PX / rows));
  const every = Math.ceil((1.2 * font) / rowPx);  // a label on every row that has room for one
  const top = Math.ceil(font * 0.6);  // the first row's label is taller than a thin row
  const axisPx = 2 * font + 24;
  const labelWidth = Math.min(Math.max(...data.labels.map((l) => measure(l))) + GAP_PX, state.width * 0.35);
  const limit = limitOf(state, shown);
  const barLabels = [limit, 0, -limit].map((v) => v.toFixed(2));
  const barWidth = BAR_PX + GAP_PX + Math.max(...barLabels.map((l) => measure(l)), measure(data.bar_title)) + 4;
  const left = labelWidth, right = state.width - barWidth - GAP_PX;
  const height = top + rows * rowPx + axisPx;
  const chart = state.chart;
  chart.replaceChildren();
  chart.setAttribute("width", state.width);
  chart.setAttribute("height", height);
  chart.setAttribute("viewBox", `0 0 ${state.width} ${height}`);

  data.labels.forEach((label, row) => {
    if (row % every) return;
    text("text", { x: left - GAP_PX, y: top + row * rowPx + rowPx / 2 + font * 0.35, "text-anchor": "end", "font-size": font,
                   class: "ls-label" }, cutToFit(label, left - GAP_PX, measure), chart);
  });
  const bottom = top + rows * rowPx;
  const cells = svg("image", { x: left, y: top, width: right - left, height: rows * rowPx, preserveAspectRatio: "none",
                               href: cellsImage(state, shown, limit), class: "ls-cells" }, chart);
  cells.addEventListener("mousemove", (event) => point(state, event, cells, shown, rows));
  cells.addEventListener("mouseleave", () => { state.readout.textContent = data.hint; });
  const columnPx = (right - left) / shown;
  for (const value of axisTicks(shown, right - left, measure)) {
    const x = left + (value + 0.5) * columnPx;
    svg("line", { x1: x, x2: x, y1: bottom, y2: bottom + 4, stroke: GRID }, chart);
    text("text", { x, y: bottom + font + 6, "text-anchor": "middle", "font-size": font, class: "ls-tick" },
         String(value), chart);
  }
  text("text", { x: (left + right) / 2, y: bottom + 2 * font + 16, "text-anchor": "middle", "font-size": font,
                 class: "ls-axis" }, `${data.axis} (first ${shown} of ${data.dims})`, chart);
  drawColourBar(state, right + GAP_PX, top, Math.max(bottom, top + 6 * font), font, barLabels);
  root.dataset.shown = JSON.stringify({ dims: shown, limit: Number(limit.toFixed(6)) });
  if (byControl) {
    requestAnimationFrame(() => {
      root.dataset.controlDrawnAt = String(performance.now());
      root.dataset.controlDraws = String(Number(root.dataset.controlDraws || 0) + 1);
    });
  }
}

// The colour bar from ``from`` to ``to``: its title over it, the limit, 0 and minus the limit beside it.
function drawColourBar(state, x, from, to, font, labels) {
  const chart = state.chart;
  const id = `${state.id}-gradient`;
  const gradient = svg("linearGradient", { id, x1: 0, y1: 1, x2: 0, y2: 0 }, svg("defs", {}, chart));
  for (const [at, rgb] of state.data.scale) svg("stop", { offset: at, "stop-color": `rgb(${rgb.join(",")})` }, gradient);
  const top = from + 1.6 * font, height = Math.min(240, to - top);
  text("text", { x, y: from + font, "font-size": font, class: "ls-bar-title" }, state.data.bar_title, chart);
  svg("rect", { x, y: top, width: BAR_PX, height, fill: `url(#${id})`, stroke: GRID }, chart);
  labels.forEach((label, index) => {
    const y = top + (index * height) / 2 + font * 0.35 + (index === 0 ? font * 0.4 : index === 2 ? -font * 0.3 : 0);
    text("text", { x: x + BAR_PX + 4, y, "font-size": font, class: "ls-tick" }, label, chart);
  });
}

function point(state, event, cells, shown, rows) {
  const box = cells.getBoundingClientRect();
  const dim = Math.min(shown - 1, Math.floor(((event.clientX - box.left) / box.width) * shown));
  const row = Math.min(rows - 1, Math.floor(((event.clientY - box.top) / box.height) * rows));
  if (dim < 0 || row < 0) return;
  state.readout.textContent = `${state.data.labels[row]} · dimension ${dim}: ${cell(state, row, dim).toPrecision(3)}`;
}

let mounted = 0;

export default function (component) {
  const { data, parentElement } = component;
  let root = parentElement.querySelector(":scope > .live-strip");
  if (root && JSON.stringify(root.liveData) === JSON.stringify(data)) return;  // a rerun with the same vectors
  const shown = root ? Number(root.liveState.slider.value) : data.start;
  if (root) root.remove();
  root = element("div", { class: "live-strip" }, parentElement);
  mounted += 1;
  const state = { root, data, id: `live-strip-${mounted}`, values: decode(data.values), width: 0 };
  root.liveState = state;
  root.liveData = data;  // for the browser tests
  const control = element("div", { class: "ls-control" }, root);
  const label = element("label", { for: `${state.id}-dims` }, control);
  text("span", {}, "Dimensions shown", label, null);
  state.output = element("output", { for: `${state.id}-dims` }, label);
  state.slider = element("input", { id: `${state.id}-dims`, type: "range", min: data.step, max: data.dims, step: data.step,
                                    value: Math.min(shown, data.dims), "data-control": "dims",
                                    "aria-label": "Dimensions shown" }, control);
  state.slider.addEventListener("input", () => draw(state, true));
  state.chart = svg("svg", { role: "img", "aria-label": data.label }, root);
  state.readout = text("p", { class: "ls-readout" }, data.hint, root, null);
  draw(state);
  new ResizeObserver(() => {
    if (Math.floor(root.clientWidth) !== state.width) draw(state);
  }).observe(root);
}
