// A code block drawn in the page's DOM: the Request page's JSON body, its picture. st.code would make a new tab
// fetch and run Streamlit's syntax highlighter (~0.5 s) before it drew anything of the run; this colours JSON's
// keys, strings, numbers and literals itself and copies the text with one click. Every piece is set with
// textContent: nothing is parsed as markup.

// JSON's tokens in order: a string (a key when a colon follows), a number, a literal, or anything else.
const TOKENS = /("(?:[^"\\]|\\.)*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b|([^"\d\-tfn]+|.)/gsy;

function span(kind, content, parent) {
  const made = element("span", kind ? { class: `lc-${kind}` } : {}, parent);
  made.textContent = content;
  return made;
}

function colourJson(text, code) {
  TOKENS.lastIndex = 0;
  let match;
  while (TOKENS.lastIndex < text.length && (match = TOKENS.exec(text)) !== null) {
    const [, string, colon, number, literal, other] = match;
    if (string !== undefined) {
      span(colon ? "key" : "string", string, code);
      if (colon) span(null, colon, code);
    } else if (number !== undefined) span("number", number, code);
    else if (literal !== undefined) span("literal", literal, code);
    else span(null, other, code);
  }
}

export default function (component) {
  const { data, parentElement } = component;
  let root = parentElement.querySelector(":scope > .live-code");
  if (root && root.liveData && root.liveData.text === data.text && root.liveData.language === data.language) return;
  if (root) root.remove();
  root = element("div", { class: "live-code", "data-language": data.language }, parentElement);
  root.liveData = data;  // for the browser tests
  const copy = element("button", { type: "button", class: "lc-copy", title: "Copy to clipboard" }, root);
  copy.textContent = "Copy";
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(data.text);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Select and copy";  // no clipboard outside a secure context (http on another host)
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  const code = element("code", {}, element("pre", { tabindex: 0, "aria-label": data.label }, root));
  if (data.language === "json") colourJson(data.text, code);
  else code.textContent = data.text;
}
