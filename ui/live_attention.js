// The Attention page's live maps: any layer, head (or the heads' mean) and query token redrawn in the
// browser from the weights charts/live_attention.py sends once (16-bit codes of each causal map's
// lower triangle). Nothing is sent back: these controls only change what is drawn.
// Every string (token labels included) is set with textContent: nothing is parsed as markup.

const TEXT = "#222222";
const MASKED = "#EEEEEE";   // keys after the query: the causal mask
const BAR = "#0072B2";      // charts.theme OKABE_ITO[0]
const OUTLINE = "#E69F00";  // OKABE_ITO[1]: the chosen query's row
const CODE_MAX = 65535;
const TOP_KEYS = 8;
const MEAN = -1;
const LABEL_PITCH = 1.5;  // row labels at least this many font sizes apart (a token glyph like ␣ stands taller than the font)




function decode(data) {
  const raw = atob(data.weights);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return new Uint16Array(bytes.buffer);
}

// Blues by the square root of the weight, so small weights stay visible (as the mosaic's colours).
function colour(weight) {
  const t = Math.sqrt(Math.max(0, Math.min(1, weight)));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(247, 8)},${mix(251, 48)},${mix(255, 107)})`;
}

// Whether ``layer``'s maps are here: a new tab's first run sends the start layer's alone (data.only_layer), the
// run after it every layer.
const hasLayer = (data, layer) => data.only_layer == null || data.only_layer === layer;

// One query's row: the chosen head's weights, or the mean of every head.
function row(state, layer, head, query) {
  const { codes, data } = state;
  const cells = (data.tokens * (data.tokens + 1)) / 2;
  const start = (query * (query + 1)) / 2;
  const values = new Float64Array(query + 1);
  const heads = head === MEAN ? [...Array(data.heads).keys()] : [head];
  const first = data.only_layer ?? 0;
  for (const h of heads) {
    const base = ((layer - first) * data.heads + h) * cells + start;
    for (let k = 0; k <= query; k++) values[k] += codes[base + k] / CODE_MAX / heads.length;
  }
  return values;
}

function fitted(measure, label, room) {
  if (measure.measureText(label).width <= room) return label;
  let cut = label;
  while (cut.length > 1 && measure.measureText(`${cut}…`).width > room) cut = cut.slice(0, -1);
  return `${cut}…`;
}

function layout(state) {
  const width = Math.max(280, Math.floor(state.root.clientWidth));
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const narrow = width < 700;
  const font = Math.round(rem * (narrow ? 0.75 : 0.8));
  const family = getComputedStyle(state.root).fontFamily;
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${font}px ${family}`;
  const n = state.data.tokens;
  const labelRoom = Math.min(Math.ceil(Math.max(...state.data.labels.map((l) => measure.measureText(l).width))) + 8,
                             Math.floor(width * (narrow ? 0.3 : 0.16)));
  const mapWidth = narrow ? width : Math.floor(width * 0.6);
  const cell = Math.max(2, Math.min(22, Math.floor((mapWidth - labelRoom - 8) / n)));
  const every = Math.max(1, Math.ceil((font * LABEL_PITCH) / cell));  // a label every `every` rows stays apart
  return { width, font, measure, labelRoom, narrow, cell, every, mapWidth,
           barsWidth: narrow ? width : width - mapWidth - 24 };
}

function buildMap(state) {
  const shape = state.shape;
  const { data } = state;
  const n = data.tokens;
  const { cell, font, labelRoom, every, measure } = shape;
  const keyRoom = cell >= font * 1.1 ? Math.min(labelRoom, 110) : font + 8;
  const height = n * cell + keyRoom + Math.ceil(font * 1.8) + 6;
  const map = state.map;
  map.replaceChildren();
  map.setAttribute("viewBox", `0 0 ${labelRoom + n * cell + 4} ${height}`);
  map.setAttribute("width", labelRoom + n * cell + 4);
  map.setAttribute("height", height);
  map.style.fontSize = `${font}px`;
  const top = Math.ceil(font * 1.8) + 4;
  state.title = text("text", { x: 0, y: font, class: "la-title" }, "", map);
  state.cells = [];
  for (let q = 0; q < n; q++) {
    const y = top + q * cell;
    if (q % every === 0 || q === n - 1 && ((n - 1) % every) * cell >= font * LABEL_PITCH) {  // the last row too, if apart
      text("text", { x: labelRoom - 4, y: y + cell / 2, "text-anchor": "end", "dominant-baseline": "central",
                     class: "la-label" }, fitted(measure, data.labels[q], labelRoom - 6), map);
    }
    const rects = [];
    for (let k = 0; k < n; k++) {
      const rect = svg("rect", { x: labelRoom + k * cell, y, width: cell, height: cell,
                                 fill: k > q ? MASKED : "#FFFFFF", "data-query": q }, map);
      if (k <= q) rects.push(rect);
    }
    state.cells.push(rects);
  }
  const bottom = top + n * cell;
  if (cell >= font * 1.1) {  // key labels under the columns, turned upright to fit one per column
    for (let k = 0; k < n; k += every) {
      const x = labelRoom + k * cell + cell / 2;
      text("text", { x, y: bottom + 4, transform: `rotate(-90 ${x} ${bottom + 4})`, "text-anchor": "end",
                     "dominant-baseline": "central", class: "la-label" },
           fitted(measure, data.labels[k], keyRoom - 8), map);
    }
  } else {
    text("text", { x: labelRoom, y: bottom + font + 2, class: "la-tick" },
         `keys ${data.labels[0].split(":")[0]} → ${data.labels[n - 1].split(":")[0]} (query down, key across)`, map);
  }
  state.outline = svg("rect", { x: labelRoom, y: top, width: cell, height: cell, fill: "none", stroke: OUTLINE,
                                "stroke-width": 2 }, map);
  state.mapTop = top;
}

function buildBars(state) {
  const shape = state.shape;
  const bars = state.bars;
  bars.replaceChildren();
  const font = shape.font;
  const rowHeight = Math.round(font * 1.9);
  const labelRoom = Math.min(shape.labelRoom, Math.floor(shape.barsWidth * 0.42));
  const valueRoom = Math.ceil(shape.measure.measureText("100.0%").width) + 8;
  const height = font + 10 + TOP_KEYS * rowHeight + 4;
  bars.setAttribute("viewBox", `0 0 ${shape.barsWidth} ${height}`);
  bars.setAttribute("width", shape.barsWidth);
  bars.setAttribute("height", height);
  bars.style.fontSize = `${font}px`;
  state.barsTitle = text("text", { x: 0, y: font, class: "la-title" }, "", bars);
  state.barRows = [];
  for (let r = 0; r < TOP_KEYS; r++) {
    const y = font + 10 + r * rowHeight;
    state.barRows.push({
      label: text("text", { x: labelRoom - 4, y: y + rowHeight / 2, "text-anchor": "end",
                            "dominant-baseline": "central", class: "la-label" }, "", bars),
      bar: svg("rect", { x: labelRoom, y: y + rowHeight * 0.15, height: rowHeight * 0.7, width: 0, fill: BAR }, bars),
      value: text("text", { x: labelRoom, y: y + rowHeight / 2, "dominant-baseline": "central", class: "la-value" },
                  "", bars),
    });
  }
  state.barScale = { x: labelRoom, width: shape.barsWidth - labelRoom - valueRoom, labelRoom };
}

function build(state) {
  state.shape = layout(state);
  state.figures.classList.toggle("la-narrow", state.shape.narrow);
  buildMap(state);
  buildBars(state);
}

function chosen(state) {
  return {
    layer: Number(state.inputs.layer.value),
    head: Number(state.inputs.head.value),
    query: Number(state.inputs.query.value),
  };
}

function headName(state, head) {
  return head === MEAN ? `mean of ${state.data.heads} heads` : `head ${head}`;
}

function draw(state, byControl = false) {
  const started = performance.now();
  const { data, shape } = state;
  const { layer, head, query } = chosen(state);
  state.outputs.layer.textContent = String(layer);
  if (!hasLayer(data, layer)) return;  // the whole maps are on their way: the run that brings them draws it
  const n = data.tokens;
  for (let q = 0; q < n; q++) {
    const weights = row(state, layer, head, q);
    const rects = state.cells[q];
    for (let k = 0; k <= q; k++) rects[k].setAttribute("fill", colour(weights[k]));
  }
  state.title.textContent = `Layer ${layer}, ${headName(state, head)}`;
  state.outline.setAttribute("y", state.mapTop + query * shape.cell);
  state.outline.setAttribute("width", (query + 1) * shape.cell);
  const weights = row(state, layer, head, query);
  const order = [...weights.keys()].sort((a, b) => weights[b] - weights[a] || a - b).slice(0, TOP_KEYS);
  const scale = state.barScale;
  const end = Math.max(1e-9, weights[order[0]]);
  state.barsTitle.textContent = fitted(shape.measure, `What ${data.labels[query]} attends to most`, shape.barsWidth);
  state.barRows.forEach((bar, rank) => {
    const key = order[rank];
    const shown = key !== undefined;
    bar.label.textContent = shown ? fitted(shape.measure, data.labels[key], scale.labelRoom - 6) : "";
    const width = shown ? (scale.width * weights[key]) / end : 0;
    bar.bar.setAttribute("width", Math.max(0, width));
    bar.value.setAttribute("x", scale.x + width + 4);
    bar.value.textContent = shown ? `${(100 * weights[key]).toFixed(1)}%` : "";
  });
  const best = order[0];
  const group = head === MEAN ? "" : ` (uses key/value head ${Math.floor(head / data.kv_group)})`;
  state.readout.textContent = `Layer ${layer}, ${headName(state, head)}${group}: ${data.labels[query]} puts `
    + `${(100 * weights[best]).toFixed(1)}% of its attention on ${data.labels[best]}.`;
  const root = state.root;
  // For the browser tests: what is drawn now, and when it was drawn.
  root.dataset.shown = JSON.stringify({ layer, head, query, row: Array.from(weights), top: order });
  root.dataset.computeMs = (performance.now() - started).toFixed(2);
  requestAnimationFrame(() => {
    root.dataset.drawnAt = String(performance.now());
    root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    if (byControl) {  // a control's own redraw, in the browser: never new data from a script run
      root.dataset.controlDrawnAt = root.dataset.drawnAt;
      root.dataset.controlDraws = String(Number(root.dataset.controlDraws || 0) + 1);
    }
  });
}

function control(state, box, name, label, input) {
  const wrap = element("div", { class: "la-control" }, box);
  const id = `${state.id}-${name}`;
  const title = element("label", { for: id }, wrap);
  text("span", {}, label, title, null);
  if (name === "layer") state.outputs.layer = text("output", { for: id }, "", title, null);
  input.id = id;
  input.dataset.control = name;
  wrap.appendChild(input);
  input.addEventListener("input", () => draw(state, true));
  state.inputs[name] = input;
}

function option(select, value, label) {
  const made = element("option", { value }, select, null);
  made.textContent = label;
}

function buildControls(state) {
  const { data } = state;
  const box = element("div", { class: "la-controls" }, state.root);
  state.inputs = {};
  state.outputs = {};
  control(state, box, "layer", "Layer", element("input", { type: "range", min: 0, max: data.layers - 1, step: 1 }));
  const head = element("select", {});
  for (let h = 0; h < data.heads; h++) option(head, h, `${h} (key/value head ${Math.floor(h / data.kv_group)})`);
  option(head, MEAN, `mean of ${data.heads}`);
  control(state, box, "head", "Head", head);
  const query = element("select", {});
  data.labels.forEach((label, q) => option(query, q, label));
  control(state, box, "query", "Query token", query);
  state.inputs.layer.value = String(data.start.layer);
  head.value = String(data.start.head);
  query.value = String(data.start.query);
}

export default function (component) {
  const { data, parentElement, key } = component;
  let root = parentElement.querySelector(":scope > .live-attention");
  if (root && root.liveState.data.fingerprint === data.fingerprint) {  // the same maps: keep the view
    const state = root.liveState;
    if (state.data.only_layer != null && data.only_layer == null) {  // the start layer's, now with every layer
      state.data = root.liveData = data;
      state.codes = decode(data);
      draw(state);
    }
    return;
  }
  if (root) root.remove();
  root = element("div", { class: "live-attention" }, parentElement);
  const state = { root, data, id: `live-attention-${key}`.replace(/[^A-Za-z0-9_-]/g, "-") };
  root.liveState = state;
  root.liveData = data;  // for the browser tests
  state.codes = decode(data);
  buildControls(state);
  state.readout = text("p", { class: "la-readout", "aria-live": "polite" }, "", root, null);
  state.figures = element("div", { class: "la-figures" }, root);
  state.map = svg("svg", { class: "la-map", role: "img", "aria-label": "Attention weights: query down, key across" },
                  state.figures);
  state.bars = svg("svg", { class: "la-bars", role: "img", "aria-label": "The keys the query attends to most" },
                   state.figures);
  state.map.addEventListener("click", (event) => {
    const q = event.target.getAttribute?.("data-query");
    if (q === null || q === undefined) return;
    state.inputs.query.value = q;
    draw(state, true);
  });
  build(state);
  draw(state);
  new ResizeObserver(() => {
    if (state.shape && Math.floor(root.clientWidth) !== state.shape.width) {
      build(state);
      draw(state);
    }
  }).observe(root);
}
