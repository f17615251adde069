// The Sampling page's live chart: temperature, top-k, top-p and min-p redone in the browser on every
// slider move, from the logits of the whole vocabulary that charts/live_sampling.py sends once.
// resample() mirrors lifecycle.stages.sampling.apply_sampling (after its moving stages, which Python ran).
// Token labels and every other string are set with textContent: nothing is parsed as markup.

const BASE_COLOUR = "#0072B2";   // charts.theme OKABE_ITO[0], as in the page's other charts
const FINAL_COLOUR = "#E69F00";  // OKABE_ITO[1]
const MUTED = "#B0B0B0";         // charts.theme MUTED: removed by a stage
const GRID = "#E5E5E5";
const TEXT = "#222222";
const SEND_AFTER_MS = 350;       // the rest of the page follows once the slider rests this long

let decoded = { fingerprint: null };  // decoded and sorted once per set of logits

function decode(data) {
  if (decoded.fingerprint === data.fingerprint) return decoded;
  const text = atob(data.logits);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  const values = data.dtype === "float64" ? new Float64Array(bytes.buffer) : new Float32Array(bytes.buffer);
  const scores = Float64Array.from(values);
  for (const [id, value] of data.moved) scores[id] = value;
  // Most likely first, ties by lower id: numpy's argmax and the nucleus's order.
  const order = new Uint32Array(scores.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  order.sort((a, b) => {
    const d = scores[b] - scores[a];
    return d > 0 ? 1 : d < 0 ? -1 : a - b;
  });
  decoded = {
    fingerprint: data.fingerprint, scores, order,
    probs: new Float64Array(scores.length), removed: new Int8Array(scores.length),
  };
  return decoded;
}

// lifecycle.stages.sampling.apply_sampling for temperature, top-k, top-p and min-p. Leaves the final
// probabilities in model.probs and each token's removing stage (or -1) in model.removed.
export function resample(model, s, stages) {
  const { scores, order, probs, removed } = model;
  const V = scores.length;
  const KEPT = -1, TEMPERATURE = stages.indexOf("temperature"), TOP_K = stages.indexOf("top_k");
  const TOP_P = stages.indexOf("top_p"), MIN_P = stages.indexOf("min_p");
  removed.fill(KEPT);
  if (s.temperature === 0) {  // greedy: the first most likely token, nothing else
    probs.fill(0);
    removed.fill(TEMPERATURE);
    probs[order[0]] = 1;
    removed[order[0]] = KEPT;
    return { kept: 1, entropy: 0, greedy: true };
  }
  const top = scores[order[0]];
  let total = 0;
  for (let i = 0; i < V; i++) {
    const e = Math.exp((scores[i] - top) / s.temperature);
    probs[i] = e;
    total += e;
  }
  for (let i = 0; i < V; i++) {
    probs[i] /= total;
    if (probs[i] === 0) removed[i] = TEMPERATURE;  // underflow at a low temperature
  }
  if (s.top_k > 0 && s.top_k < V) {
    for (let r = s.top_k; r < V; r++) if (removed[order[r]] === KEPT) removed[order[r]] = TOP_K;
  }
  if (s.top_p < 1) {  // the smallest most likely set whose mass reaches top_p of what is left
    let mass = 0;
    for (let i = 0; i < V; i++) if (removed[i] === KEPT) mass += probs[i];
    const target = s.top_p * mass;
    let sum = 0, inside = true;
    for (let r = 0; r < V; r++) {
      const i = order[r];
      if (removed[i] !== KEPT) continue;
      if (!inside) { removed[i] = TOP_P; continue; }
      sum += probs[i];
      if (sum >= target) inside = false;
    }
  }
  if (s.min_p > 0) {
    let best = 0;
    for (let i = 0; i < V; i++) if (removed[i] === KEPT && probs[i] > best) best = probs[i];
    const threshold = s.min_p * best;
    for (let i = 0; i < V; i++) if (removed[i] === KEPT && probs[i] < threshold) removed[i] = MIN_P;
  }
  let left = 0, kept = 0;
  for (let i = 0; i < V; i++) {
    if (removed[i] === KEPT) { left += probs[i]; kept++; } else probs[i] = 0;
  }
  let entropy = 0;
  for (let i = 0; i < V; i++) {
    if (probs[i] > 0) {
      probs[i] /= left;
      entropy -= probs[i] * Math.log2(probs[i]);
    }
  }
  return { kept, entropy, greedy: false };
}

const percent = (p) => `${(100 * p).toFixed(1)}%`;




// The axis end: the smallest round share at or above the largest bar.
function axisEnd(largest) {
  const ends = [0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1];
  return ends.find((end) => end >= largest - 1e-12) ?? 1;
}

function tickText(share, end) {
  return `${(100 * share).toFixed(end < 0.1 ? 1 : 0)}%`;
}

function knobValue(state, knob) {
  const input = state.inputs[knob];
  if (knob === "top_k") return state.data.knobs.top_k.choices[Number(input.value)];
  return Number(input.value);
}

function knobText(knob, value) {
  if (knob === "top_k") return value === 0 ? "0 (off)" : String(value);
  if (knob === "temperature") return value === 0 ? "0 (greedy)" : value.toFixed(2);
  if (knob === "top_p" && value === 1) return "1 (off)";
  if (knob === "min_p" && value === 0) return "0 (off)";
  return value.toFixed(2);
}

function setKnobs(state, settings) {
  for (const [knob, input] of Object.entries(state.inputs)) {
    const value = settings[knob];
    if (knob === "top_k") {
      const choices = state.data.knobs.top_k.choices;
      const index = choices.indexOf(value);
      input.value = String(index >= 0 ? index : 0);
    } else input.value = String(value);
  }
}

function currentSettings(state) {
  const settings = {};
  for (const knob of Object.keys(state.inputs)) settings[knob] = knobValue(state, knob);
  return settings;
}

const sameSettings = (a, b) => a && b && Object.keys(a).every((knob) => a[knob] === b[knob]);

function buildControls(state) {
  const { root, data } = state;
  const controls = element("div", { class: "ls-controls" }, root);
  state.inputs = {};
  state.outputs = {};
  for (const [knob, spec] of Object.entries(data.knobs)) {
    const id = `${state.key}-${knob}`;
    const box = element("div", { class: "ls-knob" }, controls);
    const label = element("label", { for: id }, box);
    text("span", { class: "ls-name" }, spec.label, label, null);
    state.outputs[knob] = text("output", { for: id }, "", label, null);
    const range = knob === "top_k"
      ? { min: 0, max: spec.choices.length - 1, step: 1 }
      : { min: spec.low, max: spec.high, step: spec.step };
    const input = element("input", { id, type: "range", ...range, "data-knob": knob, title: spec.help }, box);
    input.addEventListener("input", () => onInput(state));
    input.addEventListener("change", () => scheduleSend(state));
    state.inputs[knob] = input;
  }
}

function onInput(state) {
  draw(state);
}

function scheduleSend(state) {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => {
    const settings = currentSettings(state);
    if (sameSettings(settings, state.sent)) return;
    state.sent = settings;
    // Stamped, so settings sent again after a preset moved the sliders away still count as a change, and so a
    // rerun can say which send it has seen.
    state.sentAt = Date.now();
    state.setStateValue("settings", { ...settings, sent_at: state.sentAt });
  }, SEND_AFTER_MS);
}

// Where everything goes at this width: one row per token; on a laptop or projector the model's panel
// beside the panel after sampling, on a phone one panel with both bars in each row, so the sliders
// and what they change stay on one screen.
function layout(state) {
  const width = Math.max(280, Math.floor(state.root.clientWidth));
  const combined = width < 620;
  // The page's type size (presenter mode makes it larger for a room), a little smaller on a phone.
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const font = Math.round(rem * (combined ? 0.875 : 1));
  const row = Math.round(font * (combined ? 2.0 : 1.7));
  const family = getComputedStyle(state.root).fontFamily;
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${font}px ${family}`;
  const widest = Math.max(...state.labels.map((label) => measure.measureText(label).width));
  const labelWidth = Math.min(Math.ceil(widest) + 10, Math.floor(width * (combined ? 0.34 : 0.26)));
  const valueRoom = Math.ceil(measure.measureText("100.0%").width) + 8;
  const title = font + 10;
  let panels;
  if (combined) {
    panels = [{ x: labelWidth, width: width - labelWidth - valueRoom - 4, labels: true, kind: "both" }];
  } else {
    const gap = 28;
    const each = Math.floor((width - labelWidth - gap - 8) / 2);
    panels = [
      { x: labelWidth, width: each, labels: true, kind: "model" },
      { x: labelWidth + each + gap, width: each - valueRoom, labels: false, kind: "final" },
    ];
  }
  const height = title + state.labels.length * row + font + 14;
  return { width, height, font, row, title, labelWidth, panels, combined };
}

function buildChart(state) {
  const shape = layout(state);
  state.shape = shape;
  const chart = state.chart;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${shape.width} ${shape.height}`);
  chart.setAttribute("width", shape.width);
  chart.setAttribute("height", shape.height);
  chart.style.fontSize = `${shape.font}px`;
  const top = shape.title;
  const bottom = top + state.labels.length * shape.row;
  state.panels = shape.panels.map((panel, index) => {
    const group = svg("g", { class: `ls-panel ls-panel-${index}` }, chart);
    if (panel.kind === "both") {  // a legend in place of the titles
      svg("rect", { x: 0, y: shape.font * 0.2, width: shape.font * 0.8, height: shape.font * 0.8, fill: BASE_COLOUR },
          group);
      const model = text("text", { x: shape.font * 1.1, y: shape.font, class: "ls-title" }, "The model (T = 1)", group);
      const after = model.getComputedTextLength() + shape.font * 2.2;
      svg("rect", { x: after, y: shape.font * 0.2, width: shape.font * 0.8, height: shape.font * 0.8,
                    fill: FINAL_COLOUR }, group);
      text("text", { x: after + shape.font * 1.1, y: shape.font, class: "ls-title" }, "After sampling", group);
    } else {
      text("text", { x: panel.x, y: shape.font, class: "ls-title" },
           panel.kind === "model" ? "The model (T = 1)" : "After sampling", group);
    }
    const grid = svg("g", { class: "ls-grid" }, group);
    const ticks = [0, 0.5, 1].map((at) => ({
      line: svg("line", { x1: panel.x, x2: panel.x, y1: top, y2: bottom, stroke: GRID }, grid),
      label: text("text", { x: panel.x, y: bottom + shape.font + 4, class: "ls-tick" }, "", group),
      at,
    }));
    svg("line", { x1: panel.x, x2: panel.x, y1: top, y2: bottom, stroke: "#444444" }, group);
    const rows = state.labels.map((label, rank) => {
      const y = top + rank * shape.row;
      if (panel.labels) {
        text("text", { x: panel.x - 6, y: y + shape.row / 2, "text-anchor": "end", "dominant-baseline": "central",
                       class: "ls-label" }, label, group);
      }
      const bars = panel.kind === "both"
        ? [svg("rect", { x: panel.x, y: y + shape.row * 0.12, height: shape.row * 0.3, width: 0 }, group),
           svg("rect", { x: panel.x, y: y + shape.row * 0.46, height: shape.row * 0.42, width: 0 }, group)]
        : [svg("rect", { x: panel.x, y: y + shape.row * 0.15, height: shape.row * 0.7, width: 0 }, group)];
      const value = panel.kind === "model" ? null
        : text("text", { x: panel.x, y: y + shape.row * (panel.kind === "both" ? 0.67 : 0.5),
                         "dominant-baseline": "central", class: "ls-value" }, "", group);
      return { bars, value };
    });
    return { ...panel, ticks, rows };
  });
  state.modelEnd = axisEnd(Math.max(...state.data.shown.map((token) => token.base)));
}

// One panel's bars: ``series`` is one list of shares per bar of a row, ``colours`` likewise.
function drawPanel(panel, series, colours, notes, end) {
  const scale = (share) => panel.x + (panel.width * share) / end;
  for (const tick of panel.ticks) {
    const x = scale(tick.at * end);
    tick.line.setAttribute("x1", x);
    tick.line.setAttribute("x2", x);
    tick.label.setAttribute("x", x);
    tick.label.setAttribute("text-anchor", tick.at === 0 ? "start" : tick.at === 1 ? "end" : "middle");
    tick.label.textContent = tickText(tick.at * end, end);
  }
  panel.rows.forEach((row, rank) => {
    row.bars.forEach((bar, which) => {
      bar.setAttribute("width", Math.max(0, scale(series[which][rank]) - panel.x));
      bar.setAttribute("fill", colours[which][rank]);
    });
    if (!row.value) return;
    const note = notes[rank];
    const last = series[series.length - 1][rank];
    row.value.setAttribute("x", note.removed ? panel.x + 4 : scale(last) + 4);
    row.value.setAttribute("fill", note.removed ? "#666666" : TEXT);
    row.value.textContent = note.text;
  });
}

// The transform at ``settings`` for the shown tokens. At the settings Python sent, before the logits are
// decoded, it is Python's own (data.opening): a new tab's first chart waits neither for the decode and sort nor
// for the logits, which its first run does not send. Null when the sliders moved before the logits came (the
// run that brings them draws the chart).
function transformed(state, settings) {
  const { data } = state;
  if (!state.model && sameSettings(settings, data.settings)) {
    const { finals, removed, kept, entropy } = data.opening;
    return { finals, stages: removed, kept, entropy, by: "python" };
  }
  if (!data.logits) return null;
  state.model = decode(data);
  const result = resample(state.model, settings, data.stages);
  return {
    finals: data.shown.map((token) => state.model.probs[token.id]),
    stages: data.shown.map((token) => state.model.removed[token.id]),
    kept: result.kept, entropy: result.entropy, by: "browser",
  };
}

function draw(state) {
  const started = performance.now();
  const { data, root } = state;
  const settings = currentSettings(state);
  for (const [knob, output] of Object.entries(state.outputs)) output.textContent = knobText(knob, settings[knob]);
  const result = transformed(state, settings);
  if (!result) return;
  const shown = data.shown;
  const { finals, stages } = result;
  const removedName = (stage) => data.stage_labels[data.stages[stage]] ?? data.stages[stage];
  const bases = shown.map((token) => token.base);
  const modelColours = stages.map((stage) => (stage === -1 ? BASE_COLOUR : MUTED));
  const finalColours = finals.map(() => FINAL_COLOUR);
  const notes = stages.map((stage, rank) => (stage === -1 ? { text: percent(finals[rank]) }
                                                          : { removed: true, text: `✗ ${removedName(stage)}` }));
  if (state.shape.combined) {
    drawPanel(state.panels[0], [bases, finals], [modelColours, finalColours], notes,
              axisEnd(Math.max(...bases, ...finals)));
  } else {
    drawPanel(state.panels[0], [bases], [modelColours], notes, state.modelEnd);
    drawPanel(state.panels[1], [finals], [finalColours], notes, axisEnd(Math.max(...finals)));
  }
  const vocabulary = data.vocabulary.toLocaleString("en");
  state.readout.textContent =
    `${result.kept.toLocaleString("en")} of ${vocabulary} tokens stay in play · the model's top token: `
    + `${percent(shown[0].base)} → ${percent(finals[0])} · entropy after: ${result.entropy.toFixed(2)} bits`;
  // For the browser tests: what this transform computed, and when the chart was redrawn.
  root.dataset.probabilities = JSON.stringify({
    settings, kept: result.kept, entropy: result.entropy, by: result.by,
    shown: shown.map((token, rank) => ({ id: token.id, final: finals[rank], removed: stages[rank] })),
  });
  root.dataset.computeMs = (performance.now() - started).toFixed(2);
  requestAnimationFrame(() => {
    root.dataset.drawnAt = String(performance.now());
    root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
  });
}

export default function (component) {
  const { data, parentElement, setStateValue, key } = component;
  let root = parentElement.querySelector(":scope > .live-sampling");
  const fresh = !root;
  if (fresh) root = element("div", { class: "live-sampling" }, parentElement);
  const state = root.liveState || { root, key: `live-sampling-${key}`.replace(/[^A-Za-z0-9_-]/g, "-"), sent: null };
  root.liveState = state;
  root.liveData = data;  // for the browser tests, which compare the transform with Python's
  state.setStateValue = setStateValue;
  const rebuilt = state.data?.fingerprint !== data.fingerprint || !state.inputs;
  state.data = data;
  state.model = decoded.fingerprint === data.fingerprint ? decoded : null;
  state.labels = data.shown.map((token, rank) => `${rank + 1}. ${token.label}`);
  if (fresh) {
    buildControls(state);
    state.readout = text("p", { class: "ls-readout", "aria-live": "polite" }, "", root, null);
    state.chart = svg("svg", { class: "ls-chart", role: "img",
                               "aria-label": "The model's most likely next tokens: probability before and after sampling" },
                      root);
    new ResizeObserver(() => {
      if (state.shape && Math.floor(root.clientWidth) !== state.shape.width) {
        buildChart(state);
        draw(state);
      }
    }).observe(root);
  }
  // Settings from Python win only when they are not the echo of what this chart sent (a preset, the sidebar),
  // and only from a run that has seen this chart's last send: a run that began before it carries older settings
  // and would move a slider back under the visitor's hand.
  const seenLastSend = state.sentAt == null || (data.seen_sent_at ?? -1) >= state.sentAt;
  if (seenLastSend && !sameSettings(data.settings, state.sent)) {
    setKnobs(state, data.settings);
    state.sent = data.settings;
  }
  if (fresh || rebuilt) buildChart(state);
  draw(state);
  // The first slider move should not pay for the decode either: it runs once the chart is painted (a task queued
  // from the frame's animation callback runs after that frame).
  if (!state.model && data.logits) {
    requestAnimationFrame(() => setTimeout(() => {
      if (!state.model && state.data.logits) state.model = decode(state.data);
    }, 0));
  }
}
