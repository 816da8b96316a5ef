// Changes: htmx swaps a revision in beside the list; move focus to it and mark the open one.

document.addEventListener("htmx:afterSwap", (event) => {
  const target = event.detail.target;
  target.querySelector("[data-focus-on-swap]")?.focus();
  const shown = target.querySelector("[data-revision]")?.dataset.revision;
  for (const link of document.querySelectorAll(".revision-list a")) {
    if (link.textContent.trim() === `Version ${shown}`) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
});
