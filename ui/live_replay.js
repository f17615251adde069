// Replays drawn in the browser: the Generation page's steps, the KV cache's growth, the recorded stream.
// charts/live_replay.py sends each finished run once as arrays; the buttons, the slider and the play
// button redraw here, with no script run. Every string is set with textContent: nothing is parsed as markup.

const BLUE = "#0072B2", ORANGE = "#E69F00", GREEN = "#009E73", VERMILION = "#D55E00", PURPLE = "#CC79A7";
const MUTED = "#B0B0B0", GRID = "#E5E5E5", INK = "#222222";
const KIND_COLOURS = { role: BLUE, content: GREEN, finish: VERMILION, usage: PURPLE, done: "#000000", error: VERMILION };

const pct = (p) => `${(100 * p).toFixed(1)}%`;
const num = (n) => n.toLocaleString("en");
const fixed = (value, digits) => value.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
// As the page's Python writes a size (views/kv_cache.py kib): KiB with one decimal below a MiB, else MiB with two.
const mib = (bytes) => (bytes < 2 ** 20 ? `${fixed(bytes / 1024, 1)} KiB` : `${fixed(bytes / 2 ** 20, 2)} MiB`);

// ---- the controls every replay shares: start, back, next, end (and play), and a slider ----

function buildControls(state, labels) {
  const bar = element("div", { class: "lr-controls" }, state.root);
  state.buttons = {};
  for (const [name, label, title] of labels) {
    const button = text("button", { type: "button", "data-action": name, title }, label, bar, null);
    button.addEventListener("click", () => act(state, name));
    state.buttons[name] = button;
  }
  state.slider = element("input", { type: "range", min: 0, max: state.count - 1, step: 1, value: state.index,
                                     "aria-label": state.sliderLabel, "data-role": "step" }, bar);
  state.slider.addEventListener("input", () => go(state, Number(state.slider.value)));
}

function act(state, name) {
  if (name !== "play") stop(state);
  const last = state.count - 1;
  const target = { start: 0, back: state.index - 1, next: state.index + 1, end: last }[name];
  if (name === "play") return play(state);
  if (name.startsWith("mark-")) return go(state, state.markIndex[Number(name.slice(5))]);
  go(state, target);
}

function go(state, index) {
  state.index = Math.max(0, Math.min(state.count - 1, index));
  draw(state);
}

function stop(state) {
  clearTimeout(state.timer);
  state.timer = null;
  if (state.buttons.play) state.buttons.play.textContent = "▶ Play";
}

// The stream replays on its own clock: each event after the gap it really had.
function play(state) {
  if (state.timer) return stop(state);
  const at = state.data.at;
  if (state.index >= state.count - 1) go(state, 0);
  state.buttons.play.textContent = "⏸ Pause";
  const tick = () => {
    if (state.index >= state.count - 1) return stop(state);
    const wait = Math.max(0, at[state.index + 1] - at[state.index]);
    state.timer = setTimeout(() => { go(state, state.index + 1); tick(); }, wait);
  };
  tick();
}

function stamp(state, started) {
  const { root } = state;
  state.slider.value = String(state.index);
  for (const [name, button] of Object.entries(state.buttons)) {
    if (name === "start" || name === "back") button.disabled = state.index <= 0;
    if (name === "next" || name === "end") button.disabled = state.index >= state.count - 1;
  }
  root.dataset.index = String(state.index);
  root.dataset.computeMs = (performance.now() - started).toFixed(2);
  requestAnimationFrame(() => {  // for the browser tests: when the redraw reached the screen
    root.dataset.drawnAt = String(performance.now());
    root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
  });
}

// ---- the Generation page: the loop one step at a time ----

function heat(p) {  // the model's own probability of a token: pale when sure, orange when unlikely
  const t = Math.max(0, Math.min(1, 1 + Math.log10(Math.max(p, 1e-4)) / 4));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(230, 255)}, ${mix(159, 255)}, ${mix(0, 255)})`;
}

function buildGeneration(state) {
  const { root, data } = state;
  state.chart = svg("svg", { class: "lr-chart", role: "img", "aria-label": "This step's most likely tokens" }, root);
  state.readout = text("p", { class: "lr-readout", "aria-live": "polite" }, "", root, null);
  state.answer = element("div", { class: "lr-answer" }, root);
  state.spans = data.tokens.map((label, i) => {
    const shown = data.deltas[i] || (data.end_of_sequence[i] ? label : "");
    const span = text("span", { class: "lr-token", "data-step": i, title: `step ${i + 1}: ${label}` }, shown,
                      state.answer, null);
    if (!data.deltas[i]) span.classList.add("lr-silent");
    span.style.background = heat(data.base[i]);
    span.addEventListener("click", () => go(state, i));
    return span;
  });
  state.strip = svg("svg", { class: "lr-strip", role: "img", "aria-label": "Each step's chosen token" }, root);
}

function drawGeneration(state) {
  const { data, index } = state;
  const count = data.tokens.length;
  const how = data.how_labels[data.how[index]];
  state.readout.textContent =
    `Step ${index + 1} of ${count}: ${data.tokens[index]}, ${how}, probability ${pct(data.p[index])} after sampling `
    + `(${pct(data.base[index])} in the model's own distribution), ${data.ms[index].toFixed(1)} ms.`
    + (index === count - 1 ? ` The loop ends here: finish_reason "${data.finish_reason}".` : "");
  state.spans.forEach((span, i) => {
    span.hidden = i > index;
    span.classList.toggle("lr-current", i === index);
  });
  const font = Math.round(fontSize() * (state.width < 620 ? 0.875 : 1));
  const rows = data.alternatives[index];
  const labels = rows.map(([label], rank) => `${rank + 1}. ${label}`);
  const width = state.width, row = Math.round(font * 2.1), top = font + 12;
  const measure = measurer(state.root, font);
  const labelWidth = Math.min(Math.ceil(Math.max(...labels.map(measure))) + 10, Math.floor(width * 0.32));
  const valueRoom = Math.ceil(measure("100.0% · model 100.0% ← chosen")) + 8;
  const narrow = width - labelWidth - valueRoom < 120;
  const plot = Math.max(60, width - labelWidth - (narrow ? measure("100.0% ←") + 8 : valueRoom));
  const height = top + rows.length * row + 4;
  const chart = state.chart;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.setAttribute("width", width);
  chart.setAttribute("height", height);
  chart.style.fontSize = `${font}px`;
  svg("rect", { x: 0, y: font * 0.2, width: font * 0.8, height: font * 0.8, fill: BLUE }, chart);
  const first = text("text", { x: font * 1.1, y: font, class: "lr-title" }, "the model (T = 1)", chart);
  const after = first.getComputedTextLength() + font * 2.2;
  svg("rect", { x: after, y: font * 0.2, width: font * 0.8, height: font * 0.8, fill: ORANGE }, chart);
  text("text", { x: after + font * 1.1, y: font, class: "lr-title" }, "after sampling", chart);
  rows.forEach(([, final, base, chosen], rank) => {
    const y = top + rank * row;
    text("text", { x: labelWidth - 6, y: y + row / 2, "text-anchor": "end", "dominant-baseline": "central",
                   class: chosen ? "lr-label lr-chosen" : "lr-label" }, labels[rank], chart);
    svg("rect", { x: labelWidth, y: y + row * 0.12, height: row * 0.3, width: plot * (base ?? 0), fill: BLUE }, chart);
    svg("rect", { x: labelWidth, y: y + row * 0.46, height: row * 0.42, width: plot * final, fill: ORANGE }, chart);
    const value = narrow ? `${pct(final)}${chosen ? " ←" : ""}`
      : `${pct(final)} · model ${base === null ? "n/a" : pct(base)}${chosen ? " ← chosen" : ""}`;
    text("text", { x: labelWidth + plot * Math.max(final, base ?? 0) + 4, y: y + row / 2,
                   "dominant-baseline": "central", class: "lr-value" }, value, chart);
  });
  drawStrip(state, font);
}

function drawStrip(state, font) {  // one bar per step: the chosen token's probability; later steps faint
  const { data, index, width } = state;
  const count = data.p.length, height = Math.round(font * 5), axis = Math.round(font * 1.6), plot = height - axis - 4;
  const strip = state.strip;
  strip.replaceChildren();
  strip.setAttribute("viewBox", `0 0 ${width} ${height}`);
  strip.setAttribute("width", width);
  strip.setAttribute("height", height);
  strip.style.fontSize = `${font}px`;
  const each = width / count;
  data.p.forEach((p, i) => {
    const h = Math.max(1, plot * p);
    const bar = svg("rect", { x: i * each + each * 0.1, y: 4 + plot - h, width: Math.max(1, each * 0.8), height: h,
                              fill: i === index ? ORANGE : i < index ? BLUE : GRID, "data-step": i }, strip);
    bar.addEventListener("click", () => go(state, i));
  });
  const baseline = height - Math.round(font * 0.4);  // room for the descenders inside the figure
  text("text", { x: 0, y: baseline, class: "lr-tick" }, "step 1", strip);
  text("text", { x: width, y: baseline, "text-anchor": "end", class: "lr-tick" },
       `step ${count}: probability of each chosen token`, strip);
}

// ---- the KV cache page: the cache at any length, beside what a decode step reads ----

function buildKv(state) {
  const { root, data } = state;
  state.markIndex = data.marks.map(([, count]) => data.positions.indexOf(count));
  state.chart = svg("svg", { class: "lr-chart", role: "img", "aria-label": "KV cache size against the weights" }, root);
  const jumps = element("div", { class: "lr-controls lr-jumps" }, root);
  data.marks.forEach(([label, count], i) => {
    const button = text("button", { type: "button", "data-action": `mark-${i}` }, `${label} (${num(count)})`, jumps, null);
    button.addEventListener("click", () => act(state, `mark-${i}`));
    state.buttons[`mark-${i}`] = button;
  });
  state.readout = text("p", { class: "lr-readout", "aria-live": "polite" }, "", root, null);
}

function drawKv(state) {
  const { data, index, width } = state;
  const positions = data.positions[index];
  const perToken = data.layers * data.kv_heads * data.head_dim * 2 * data.bytes_per_number;
  const gqa = perToken * positions, mha = gqa * (data.query_heads / data.kv_heads), weights = data.weight_bytes;
  const share = gqa / weights;
  state.readout.textContent =
    `At ${num(positions)} positions the cache holds ${mib(gqa)} (${data.layers} layers × ${data.kv_heads} KV heads × `
    + `${data.head_dim} × 2 × ${data.bytes_per_number} bytes per position); with one K/V per query head it would be `
    + `${mib(mha)}. A decode step reads it all beside ${mib(weights)} of weights: the cache is ${pct(share)} of them.`;
  const font = Math.round(fontSize() * (width < 620 ? 0.875 : 1));
  const measure = measurer(state.root, font);
  const rows = [["this model (grouped-query)", gqa, BLUE], [`one K/V per head (${data.query_heads})`, mha, MUTED],
                ["weights read per step", weights, GREEN]];
  const narrow = width < 620;
  const labelWidth = narrow ? 0 : Math.ceil(Math.max(...rows.map(([label]) => measure(label)))) + 12;
  const row = Math.round(font * (narrow ? 3.2 : 2.2)), top = 4;
  const valueRoom = Math.ceil(measure(mib(Math.max(mha, weights)))) + 8;
  const plot = width - labelWidth - valueRoom;
  const end = Math.max(mha, weights);
  const height = top + rows.length * row + Math.round(font * 1.8);
  const chart = state.chart;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.setAttribute("width", width);
  chart.setAttribute("height", height);
  chart.style.fontSize = `${font}px`;
  rows.forEach(([label, bytes, colour], i) => {
    const y = top + i * row;
    const barTop = narrow ? y + font * 1.3 : y + row * 0.15;
    const barHeight = narrow ? row - font * 1.6 : row * 0.7;
    if (narrow) text("text", { x: 0, y: y + font, class: "lr-label" }, label, chart);
    else text("text", { x: labelWidth - 6, y: y + row / 2, "text-anchor": "end", "dominant-baseline": "central",
                        class: "lr-label" }, label, chart);
    const w = Math.max(1, (plot * bytes) / end);
    svg("rect", { x: labelWidth, y: barTop, width: w, height: barHeight, fill: colour }, chart);
    text("text", { x: labelWidth + w + 4, y: barTop + barHeight / 2, "dominant-baseline": "central", class: "lr-value" },
         mib(bytes), chart);
  });
  const axisY = height - Math.round(font * 0.4);
  text("text", { x: labelWidth, y: axisY, class: "lr-tick" }, "0", chart);
  text("text", { x: labelWidth + plot, y: axisY, "text-anchor": "end", class: "lr-tick" }, mib(end), chart);
}

// ---- the Streaming page: the recorded stream replayed on its own clock ----

function buildStream(state) {
  const { root } = state;
  state.chart = svg("svg", { class: "lr-chart", role: "img", "aria-label": "The stream's events on a time axis" }, root);
  state.readout = text("p", { class: "lr-readout", "aria-live": "polite" }, "", root, null);
  state.answer = text("div", { class: "lr-answer lr-plain" }, "", root, null);
  state.frame = text("pre", { class: "lr-frame" }, "", root, null);
}

function drawStream(state) {
  const { data, index, width } = state;
  const count = data.at.length, now = data.at[index];
  state.readout.textContent = `Event ${index + 1} of ${count} at ${fixed(now, 1)} ms: ${data.kinds[index]}`
    + (data.text[index] ? ` (${JSON.stringify(data.text[index])})` : "")
    + `. The client has ${data.text.slice(0, index + 1).join("").length} characters so far.`;
  state.answer.textContent = data.text.slice(0, index + 1).join("") || "…";
  state.frame.textContent = data.sse[index];
  const font = Math.round(fontSize() * (width < 620 ? 0.875 : 1));
  const height = Math.round(font * 6), axis = Math.round(font * 1.7), plotTop = 8, plot = height - axis - plotTop;
  const last = Math.max(data.at[count - 1], 1);
  const margin = font;
  const x = (ms) => margin + ((width - 2 * margin) * ms) / last;
  const chart = state.chart;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.setAttribute("width", width);
  chart.setAttribute("height", height);
  chart.style.fontSize = `${font}px`;
  svg("line", { x1: x(0), x2: x(last), y1: plotTop + plot, y2: plotTop + plot, stroke: INK }, chart);
  svg("rect", { x: x(0), y: plotTop, width: Math.max(0, x(now) - x(0)), height: plot, fill: GRID }, chart);
  data.at.forEach((at, i) => {
    const y = plotTop + plot * (1 - (i + 1) / (count + 1));
    svg("circle", { cx: x(at), cy: y, r: Math.max(2.5, font * 0.28),
                    fill: i <= index ? KIND_COLOURS[data.kinds[i]] ?? INK : "none",
                    stroke: i <= index ? "none" : MUTED }, chart);
  });
  svg("line", { x1: x(now), x2: x(now), y1: plotTop, y2: plotTop + plot, stroke: ORANGE, "stroke-width": 2 }, chart);
  const baseline = height - Math.round(font * 0.4);  // room for the descenders inside the figure
  text("text", { x: x(0), y: baseline, class: "lr-tick" }, "0 ms", chart);
  text("text", { x: x(last), y: baseline, "text-anchor": "end", class: "lr-tick" }, `${fixed(last, 1)} ms`, chart);
}

// ---- mounting ----

const KINDS = {
  generation: { build: buildGeneration, draw: drawGeneration, count: (d) => d.tokens.length, slider: "Step",
                start: () => 0,
                buttons: [["start", "⏮ Step 1", "The first step"], ["back", "◀ Back", "One step back"],
                          ["next", "Next token ▶", "One step on"], ["end", "⏭ Last step", "The last step"]] },
  kv: { build: buildKv, draw: drawKv, count: (d) => d.positions.length, slider: "Positions in the cache",
        start: (d) => Math.max(0, d.positions.indexOf(d.start)),
        buttons: [["back", "◀ Fewer", "Fewer positions"], ["next", "More ▶", "More positions"]] },
  stream: { build: buildStream, draw: drawStream, count: (d) => d.at.length, slider: "Event",
            start: (d) => d.at.length - 1,
            buttons: [["play", "▶ Play", "Replay the stream on its own clock, each event after its real gap"],
                      ["start", "⏮ First", "The first event"], ["back", "◀ Back", "One event back"],
                      ["next", "Next ▶", "One event on"], ["end", "⏭ Last", "The last event"]] },
};

function draw(state) {
  const started = performance.now();
  state.width = Math.max(280, Math.floor(state.root.clientWidth));
  KINDS[state.data.kind].draw(state);
  stamp(state, started);
}

export default function (component) {
  const { data, parentElement } = component;
  const kind = KINDS[data.kind];
  let root = parentElement.querySelector(":scope > .live-replay");
  const same = root && root.liveState && JSON.stringify(root.liveState.data) === JSON.stringify(data);
  if (same) return;  // a rerun with the same run: keep the reader's place
  if (root) { stop(root.liveState); root.remove(); }
  root = element("div", { class: `live-replay live-replay-${data.kind}`, "data-kind": data.kind }, parentElement);
  const count = kind.count(data);
  const state = { root, data, count, index: kind.start(data), sliderLabel: kind.slider, timer: null };
  root.liveState = state;
  root.liveData = data;  // for the browser tests
  if (count === 0) return;
  buildControls(state, kind.buttons);
  kind.build(state);
  draw(state);
  new ResizeObserver(() => {
    if (Math.floor(root.clientWidth) !== state.width) draw(state);
  }).observe(root);
}
