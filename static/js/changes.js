// Changes: htmx swaps a revision in beside the list; move focus to it and mark the open one.
// "Restore this version" makes the revision's text a new version, on the version the page
// last saw (a newer one saved meanwhile is a conflict, and nothing changes).

import { announce, api, failure } from "./shared.js";

document.addEventListener("htmx:afterSwap", (event) => {
  const target = event.detail.target;
  target.querySelector("[data-focus-on-swap]")?.focus();
  const shown = target.querySelector("[data-revision]")?.dataset.revision;
  for (const link of document.querySelectorAll(".revision-list a")) {
    if (link.textContent.trim() === `Version ${shown}`) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
});

async function restore(button) {
  const status = document.getElementById("restore-status");
  const { url, version, base, changesUrl } = button.dataset;
  button.disabled = true;
  const result = await api("PUT", url, {
    body: { restoreVersion: Number(version) },
    headers: { "X-Base-Version": base },
  });
  button.disabled = false;
  if (result.ok) {
    // The list gains the new version at its top: show it, with its diff.
    window.location.assign(`${changesUrl}${result.data.version}/`);
    return;
  }
  if (result.code === "VERSION_CONFLICT") {
    button.dataset.base = String(result.detail.currentVersion);
    announce(
      status,
      `Not restored: memory changed to version ${result.detail.currentVersion} since this ` +
        "page loaded, so nothing changed. Press Restore this version again to restore it " +
        `over version ${result.detail.currentVersion}. (${result.code})`,
      "error",
    );
    return;
  }
  announce(status, failure("Not restored", result, " Nothing changed."), "error");
}

document.addEventListener("click", (event) => {
  const button = event.target.closest(".restore-version");
  if (button) restore(button);
});
