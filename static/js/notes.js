// The Notes list: create a note, restore a deleted one.

import {
  announce,
  api,
  byId,
  config,
  documentUrl,
  failure,
  noteUrl,
  pathFailure,
} from "./shared.js";

function setUpNotesList() {
  const status = byId("notes-status");
  byId("note-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const path = form.elements.path.value;
    const result = await api("PUT", documentUrl(path), {
      body: { content: form.elements.content.value },
      headers: { "X-Base-Version": "0" },
    });
    if (result.ok) {
      window.location.assign(noteUrl(result.data.path));
    } else if (result.code === "VERSION_CONFLICT") {
      announce(status, failure("Not created", result, " A note already has this path."), "error");
    } else {
      announce(status, pathFailure("Not created", result), "error");
    }
  });
  for (const button of document.querySelectorAll(".note-restore")) {
    button.addEventListener("click", async () => {
      const result = await api("POST", config.urls.documentsRestore, {
        body: { path: button.dataset.path },
        headers: { "X-Base-Version": button.dataset.version },
      });
      if (result.ok) {
        window.location.assign(noteUrl(result.data.path));
      } else {
        announce(status, failure("Not restored", result), "error");
      }
    });
  }
}

if (byId("note-create") && config) setUpNotesList();
