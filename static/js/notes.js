// The Notes list: create a note, restore a deleted one.

import { announce, byId, failure, noteRestore, noteUrl, noteWrite } from "./shared.js";

function setUpNotesList() {
  const status = byId("notes-status");
  byId("note-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const path = form.elements.path.value;
    const result = await noteWrite(path, form.elements.content.value, 0);
    if (result.ok) {
      window.location.assign(noteUrl(result.data.path));
    } else if (result.code === "VERSION_CONFLICT") {
      announce(
        status,
        "Not created: a note already has this path (perhaps a deleted one); open it or " +
          "choose another path. (VERSION_CONFLICT)",
        "error",
      );
    } else {
      announce(status, failure("Not created", result), "error");
    }
  });
  for (const button of document.querySelectorAll(".note-restore")) {
    button.addEventListener("click", async () => {
      const result = await noteRestore(button.dataset.path, button.dataset.version);
      if (result.ok) {
        window.location.assign(noteUrl(result.data.path));
      } else {
        announce(status, failure("Not restored", result), "error");
      }
    });
  }
}

// The archive is fetched first, so that a refusal (a credential in a note) is said here in
// words instead of being saved as a file; only a whole archive is handed to the browser.
async function downloadNotes(event) {
  event.preventDefault();
  const link = event.currentTarget;
  const status = byId("notes-export-status");
  announce(status, "Preparing the archive…", "info", { focus: false });
  let response;
  try {
    response = await fetch(link.href, { credentials: "same-origin" });
  } catch {
    announce(status, failure("Not downloaded", { code: "NETWORK_ERROR", detail: {} }), "error");
    return;
  }
  if (!response.ok) {
    const error = (await response.json().catch(() => null))?.error ?? {};
    const result = { code: error.code ?? `HTTP_${response.status}`, detail: error.detail ?? {} };
    announce(status, failure("Not downloaded", { ...result, message: error.message }), "error");
    return;
  }
  const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") ?? "");
  const url = URL.createObjectURL(await response.blob());
  const save = document.createElement("a");
  save.href = url;
  save.download = name ? name[1] : "notes.tar.gz";
  save.click();
  URL.revokeObjectURL(url);
  announce(status, "Downloaded the notes archive.", "success", { focus: false });
}

if (byId("note-create")) setUpNotesList();
byId("notes-export")?.addEventListener("click", downloadNotes);
