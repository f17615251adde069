// Presenter mode's keyboard: ArrowRight / ArrowLeft open the next / previous stage; PageDown /
// PageUp (what a presentation clicker sends) scroll the page first and move on at its end.
(() => {
  if (window.lifecycleKeys) return;  // st.html runs this on every script run; one listener is enough
  window.lifecycleKeys = true;
  const presenting = () => ["1", "true"].includes(new URLSearchParams(window.location.search).get("present"));
  const typing = (element) => element instanceof Element && (
    element.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(element.tagName)
    || element.closest('[role="slider"], [role="listbox"], [role="tablist"], [role="radiogroup"]'));
  // A stage link's text is its icon's ligature name, then "Next: <stage>" or "Back: <stage>".
  const link = (prefix) => [...document.querySelectorAll('[data-testid="stPageLink"] a')]
    .find((anchor) => anchor.innerText.includes(`${prefix} `));
  const scroller = () => document.querySelector('[data-testid="stMain"]') || document.scrollingElement;
  // A key pressed while the page is still drawing waits for its stage link (up to 10 s).
  const go = (prefix, tries = 50) => {
    const target = link(prefix);
    if (target) target.click();
    else if (tries > 0) setTimeout(() => go(prefix, tries - 1), 200);
  };
  document.addEventListener("keydown", (event) => {
    if (!presenting() || event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    const main = scroller();
    const page = main.clientHeight * 0.85;
    if (event.key === "ArrowRight") go("Next:");
    else if (event.key === "ArrowLeft") go("Back:");
    else if (event.key === "PageDown") {
      if (main.scrollTop + main.clientHeight >= main.scrollHeight - 4) go("Next:");
      else main.scrollBy({ top: page, behavior: "smooth" });
    } else if (event.key === "PageUp") {
      if (main.scrollTop <= 4) go("Back:");
      else main.scrollBy({ top: -page, behavior: "smooth" });
    } else return;
    event.preventDefault();
  });
})();
