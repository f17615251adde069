// The Forward pass page's live block: any layer, query head and token, redrawn in the browser from one
// hooked pass's numbers (charts/live_block.py): the block's steps with their lengths, the keys the head
// attends to most, and the residual stream through every layer. When the controls rest, the
// (layer, head, token) goes back to Python, so the step-by-step details below follow.
// Every string (token labels included) is set with textContent: nothing is parsed as markup.

const BLUE = "#0072B2";     // charts.theme OKABE_ITO[0]: attention
const ORANGE = "#E69F00";   // OKABE_ITO[1]: the chosen layer
const GREEN = "#009E73";    // OKABE_ITO[2]: the residual adds
const RED = "#D55E00";      // OKABE_ITO[5]: the MLP
const STEP_FILL = "#9CC3E4";
const SEND_AFTER_MS = 350;




function fitted(measure, label, room) {
  if (measure.measureText(label).width <= room) return label;
  let cut = label;
  while (cut.length > 1 && measure.measureText(`${cut}…`).width > room) cut = cut.slice(0, -1);
  return `${cut}…`;
}

const length = (value) => value.toLocaleString("en", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

function layout(state) {
  const width = Math.max(280, Math.floor(state.root.clientWidth));
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const narrow = width < 700;
  const font = Math.round(rem * (narrow ? 0.75 : 0.8));
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${font}px ${getComputedStyle(state.root).fontFamily}`;
  const left = narrow ? width : Math.floor(width * 0.5);
  return { width, font, measure, narrow, left, right: narrow ? width : width - left - 24 };
}

function buildFlow(state) {
  const { shape, data } = state;
  const { font, measure } = shape;
  const width = shape.left;
  const rowHeight = Math.round(font * 2.9);
  const nameRoom = Math.min(Math.ceil(Math.max(...data.steps.map((s) => measure.measureText(s.name).width))) + 10,
                            Math.floor(width * 0.55));
  const valueRoom = Math.ceil(measure.measureText("0,000.0").width) + 8;
  const height = font + 10 + data.steps.length * rowHeight;
  const flow = state.flow;
  flow.replaceChildren();
  flow.setAttribute("viewBox", `0 0 ${width} ${height}`);
  flow.setAttribute("width", width);
  flow.setAttribute("height", height);
  flow.style.fontSize = `${font}px`;
  state.flowTitle = text("text", { x: 0, y: font, class: "lb-title" }, "", flow);
  state.flowRows = data.steps.map((step, i) => {
    const y = font + 10 + i * rowHeight;
    text("text", { x: 0, y: y + font * 1.05, class: step.add ? "lb-label lb-add" : "lb-label" },
         fitted(measure, step.name, nameRoom - 8), flow);
    text("text", { x: 0, y: y + font * 2.5, class: "lb-tick" }, fitted(measure, step.shape, nameRoom - 8), flow);
    return {
      bar: svg("rect", { x: nameRoom, y: y + rowHeight * 0.18, height: rowHeight * 0.5, width: 0,
                         fill: step.add ? GREEN : STEP_FILL }, flow),
      value: text("text", { x: nameRoom, y: y + rowHeight * 0.43, "dominant-baseline": "central", class: "lb-value" },
                  "", flow),
    };
  });
  state.flowScale = { x: nameRoom, width: width - nameRoom - valueRoom };
}

function buildKeys(state) {
  const { shape, data } = state;
  const { font, measure } = shape;
  const width = shape.right;
  const rowHeight = Math.round(font * 1.9);
  const labels = Object.values(data.labels);
  const labelRoom = Math.min(Math.ceil(Math.max(...labels.map((l) => measure.measureText(l).width))) + 10,
                             Math.floor(width * 0.42));
  const valueRoom = Math.ceil(measure.measureText("100.0%").width) + 8;
  const height = font + 10 + data.top * rowHeight;
  const keys = state.keys;
  keys.replaceChildren();
  keys.setAttribute("viewBox", `0 0 ${width} ${height}`);
  keys.setAttribute("width", width);
  keys.setAttribute("height", height);
  keys.style.fontSize = `${font}px`;
  state.keysTitle = text("text", { x: 0, y: font, class: "lb-title" }, "", keys);
  state.keyRows = [...Array(data.top).keys()].map((r) => {
    const y = font + 10 + r * rowHeight;
    return {
      label: text("text", { x: labelRoom - 6, y: y + rowHeight / 2, "text-anchor": "end",
                            "dominant-baseline": "central", class: "lb-label" }, "", keys),
      bar: svg("rect", { x: labelRoom, y: y + rowHeight * 0.15, height: rowHeight * 0.7, width: 0, fill: BLUE }, keys),
      value: text("text", { x: labelRoom, y: y + rowHeight / 2, "dominant-baseline": "central", class: "lb-value" },
                  "", keys),
    };
  });
  state.keyScale = { x: labelRoom, width: width - labelRoom - valueRoom, labelRoom };
}

// The residual stream's length after the embedding and each layer (line, right scale) over what each
// layer's attention and MLP add (bars, left scale), at token index t of the data; the chosen layer in a band.
function buildStack(state, t) {
  const { shape, data } = state;
  const attention = data.attention.slice(t * data.layers, (t + 1) * data.layers);
  const mlp = data.mlp.slice(t * data.layers, (t + 1) * data.layers);
  const residual = data.residual.slice(t * (data.layers + 1), (t + 1) * (data.layers + 1));
  const { font, measure } = shape;
  const width = shape.right;
  const height = Math.round(font * 14);
  const stack = state.stack;
  stack.replaceChildren();
  stack.setAttribute("viewBox", `0 0 ${width} ${height}`);
  stack.setAttribute("width", width);
  stack.setAttribute("height", height);
  stack.style.fontSize = `${font}px`;
  const maxAdded = Math.max(...attention, ...mlp);
  const maxStream = Math.max(...residual);
  const leftRoom = Math.ceil(measure.measureText(length(maxAdded)).width) + 6;
  const rightRoom = Math.ceil(measure.measureText(length(maxStream)).width) + 6;
  const top = font + 10, bottom = height - font - 8;
  const slots = data.layers + 1;  // the embedding, then each layer
  const slot = (width - leftRoom - rightRoom) / slots;
  const x = (layer) => leftRoom + (layer + 1.5) * slot;  // layer -1 is the embedding
  state.stackTitle = text("text", { x: 0, y: font, class: "lb-title" }, "The token through every layer", stack);
  state.band = svg("rect", { x: 0, y: top, width: slot, height: bottom - top, fill: ORANGE, opacity: 0.25 }, stack);
  svg("line", { x1: leftRoom, x2: width - rightRoom, y1: bottom, y2: bottom, stroke: "#444444" }, stack);
  text("text", { x: leftRoom - 4, y: top, "text-anchor": "end", "dominant-baseline": "hanging", fill: BLUE,
                 class: "lb-tick" }, length(maxAdded), stack);
  text("text", { x: width - rightRoom + 4, y: top, "dominant-baseline": "hanging", class: "lb-tick" },
       length(maxStream), stack);
  const bar = slot * 0.38;
  for (let l = 0; l < data.layers; l++) {
    const a = ((bottom - top) * attention[l]) / maxAdded, m = ((bottom - top) * mlp[l]) / maxAdded;
    svg("rect", { x: x(l) - bar, y: bottom - a, width: bar, height: a, fill: BLUE }, stack);
    svg("rect", { x: x(l), y: bottom - m, width: bar, height: m, fill: RED }, stack);
  }
  const points = residual.map((r, i) => `${x(i - 1)},${bottom - ((bottom - top) * r) / maxStream}`);
  svg("polyline", { points: points.join(" "), fill: "none", stroke: "#222222", "stroke-width": 2 }, stack);
  const every = Math.max(1, Math.ceil((measure.measureText("00").width + 8) / slot / 5) * 5);
  for (let l = 0; l < data.layers; l += every) {
    text("text", { x: x(l), y: bottom + font + 2, "text-anchor": "middle", class: "lb-tick" }, String(l), stack);
  }
  state.stackX = x;
  state.slot = slot;
  state.stackToken = t;
}

function build(state) {
  state.shape = layout(state);
  state.figures.classList.toggle("lb-narrow", state.shape.narrow);
  buildFlow(state);
  buildKeys(state);
  state.stackToken = null;  // drawn by draw(), for the chosen token
}

function chosen(state) {
  const { inputs } = state;
  return { layer: Number(inputs.layer.value), head: Number(inputs.head.value), position: Number(inputs.token.value) };
}

const viewKey = (view) => `${view.layer},${view.head},${view.position}`;

function draw(state, byControl = false) {
  const started = performance.now();
  const { data, shape } = state;
  const { layer, head, position } = chosen(state);
  const t = position - data.tokens[0];
  const token = data.labels[String(position)];
  state.outputs.layer.textContent = String(layer);
  state.outputs.token.textContent = token;
  if (state.stackToken !== t) buildStack(state, t);
  const steps = data.steps.length;
  const cell = t * data.layers + layer;  // this token's row for this layer in the flattened arrays
  const norms = data.step_norms.slice(cell * steps, (cell + 1) * steps);
  const largest = Math.max(...norms.filter((n) => n !== null));
  state.flowTitle.textContent = fitted(shape.measure, `Block ${layer} at ${token}: length ‖·‖ after each step`,
                                       shape.left);
  state.flowRows.forEach((row, i) => {
    const norm = norms[i];
    const width = norm === null ? 0 : (state.flowScale.width * norm) / largest;
    row.bar.setAttribute("width", width);
    row.value.setAttribute("x", state.flowScale.x + width + 4);
    row.value.textContent = norm === null ? "(no vector per token)" : length(norm);
  });
  const at = (cell * data.heads + head) * data.top;
  const keys = data.keys.slice(at, at + data.top).filter((k) => k >= 0);
  const weights = data.weights.slice(at, at + keys.length).map((w) => w * data.weight_unit);
  const end = Math.max(1e-9, weights[0]);
  state.keysTitle.textContent = fitted(shape.measure, `Head ${head} (key/value head ${Math.floor(head / data.kv_group)}): `
                                       + `what ${token} attends to`, shape.right);
  state.keyRows.forEach((row, r) => {
    const shown = r < keys.length;
    row.label.textContent = shown ? fitted(shape.measure, data.labels[String(keys[r])], state.keyScale.labelRoom - 8) : "";
    const width = shown ? (state.keyScale.width * weights[r]) / end : 0;
    row.bar.setAttribute("width", width);
    row.value.setAttribute("x", state.keyScale.x + width + 4);
    row.value.textContent = shown ? `${(100 * weights[r]).toFixed(1)}%` : "";
  });
  state.band.setAttribute("x", state.stackX(layer) - state.slot / 2);
  const attention = data.attention[cell], mlp = data.mlp[cell];
  state.readout.textContent = `Block ${layer} takes ${token} from length ${length(norms[0])} to `
    + `${length(norms[norms.length - 1])}: attention adds ${length(attention)}, the MLP ${length(mlp)}. `
    + `Head ${head} puts ${(100 * weights[0]).toFixed(1)}% on ${data.labels[String(keys[0])]}.`;
  const root = state.root;
  root.dataset.shown = JSON.stringify({ layer, head, position, norms, keys, weights });
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

function scheduleSend(state) {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => {
    const view = chosen(state);
    if (state.sent && viewKey(view) === viewKey(state.sent)) return;
    state.sent = view;
    state.echoes.add(viewKey(view));
    state.setStateValue("view", { ...view, sent_at: Date.now() });
  }, SEND_AFTER_MS);
}

function control(state, box, name, label, input) {
  const wrap = element("div", { class: "lb-control" }, box);
  const id = `${state.id}-${name}`;
  const title = element("label", { for: id }, wrap);
  text("span", {}, label, title, null);
  if (name === "layer" || name === "token") state.outputs[name] = text("output", { for: id }, "", title, null);
  input.id = id;
  input.dataset.control = name;
  wrap.appendChild(input);
  input.addEventListener("input", () => draw(state, true));
  input.addEventListener("change", () => scheduleSend(state));
  state.inputs[name] = input;
}

function buildControls(state) {
  const { data } = state;
  const box = element("div", { class: "lb-controls" }, state.root);
  state.inputs = {};
  state.outputs = {};
  control(state, box, "layer", "Layer (block)",
          element("input", { type: "range", min: 0, max: data.layers - 1, step: 1 }));
  const head = element("select", {});
  for (let h = 0; h < data.heads; h++) {
    const made = element("option", { value: h }, head, null);
    made.textContent = `${h} (key/value head ${Math.floor(h / data.kv_group)})`;
  }
  control(state, box, "head", "Query head", head);
  control(state, box, "token", "Token",
          element("input", { type: "range", min: data.tokens[0], max: data.tokens[1] - 1, step: 1 }));
}

function setView(state, view) {
  state.inputs.layer.value = String(view.layer);
  state.inputs.head.value = String(view.head);
  state.inputs.token.value = String(view.position);
  state.sent = { layer: view.layer, head: view.head, position: view.position };
  state.echoes = new Set([viewKey(view)]);
}

export default function (component) {
  const { data: sent, parentElement, setStateValue, key } = component;
  let root = parentElement.querySelector(":scope > .live-block");
  let state = root?.liveState;
  if (state && state.data.fingerprint !== sent.fingerprint) {
    root.remove();
    root = null;
  }
  // The numbers come as one JSON string (charts/live_block.py), read once per block.
  const { body, ...meta } = sent;
  const data = { ...(root ? state.data : JSON.parse(body)), ...meta };
  if (!root) {
    root = element("div", { class: "live-block" }, parentElement);
    state = { root, data, id: `live-block-${key}`.replace(/[^A-Za-z0-9_-]/g, "-"), sent: null };
    root.liveState = state;
    buildControls(state);
    state.readout = text("p", { class: "lb-readout", "aria-live": "polite" }, "", root, null);
    state.figures = element("div", { class: "lb-figures" }, root);
    state.flow = svg("svg", { class: "lb-flow", role: "img", "aria-label": "The block's steps and their lengths" },
                     state.figures);
    const side = element("div", { class: "lb-side" }, state.figures);
    state.keys = svg("svg", { class: "lb-keys", role: "img", "aria-label": "The keys the head attends to most" }, side);
    state.stack = svg("svg", { class: "lb-stack", role: "img", "aria-label": "The residual stream through the layers" },
                      side);
    const legend = element("p", { class: "lb-legend" }, side, null);
    for (const [colour, name] of [[BLUE, "attention adds"], [RED, "MLP adds"], ["#222222", "stream length (line)"],
                                  [ORANGE, "this block"]]) {
      const item = element("span", {}, legend, null);
      element("i", { style: `background:${colour}` }, item, null);
      item.appendChild(document.createTextNode(name));
    }
    setView(state, data.start);
    build(state);
    new ResizeObserver(() => {
      if (state.shape && Math.floor(root.clientWidth) !== state.shape.width) {
        build(state);
        draw(state);
      }
    }).observe(root);
  } else if (!state.echoes.has(viewKey(data.start))) {
    setView(state, data.start);  // a change from the server, not the echo of a view this block sent
  }
  state.data = data;
  state.setStateValue = setStateValue;
  root.liveData = data;  // for the browser tests
  draw(state);
}
