// What every browser-drawn figure (ui/live_*.js) shares, prepended to each one's module by ui/live_dom.py:
// elements made with their attributes, SVG elements, texts set with textContent (nothing is parsed as markup),
// the page's font size and a text measurer in the page's font.

const SVG = "http://www.w3.org/2000/svg";

function element(tag, attributes = {}, parent = null, namespace = null) {
  const made = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, String(value));
  if (parent) parent.appendChild(made);
  return made;
}

const svg = (tag, attributes, parent) => element(tag, attributes, parent, SVG);

function text(tag, attributes, content, parent, namespace = SVG) {
  const made = element(tag, attributes, parent, namespace);
  made.textContent = content;
  return made;
}

function fontSize() {
  return parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
}

// The width of a label in ``font`` px of the root's font family.
function measurer(root, font) {
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${font}px ${getComputedStyle(root).fontFamily}`;
  return (label) => context.measureText(label).width;
}

// The label, cut with "…" until it fits ``width`` px.
function cutToFit(label, width, measure) {
  if (measure(label) <= width) return label;
  let kept = label;
  while (kept.length > 1 && measure(`${kept}…`) > width) kept = kept.slice(0, -1);
  return `${kept}…`;
}
