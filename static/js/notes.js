// The Notes list: create a note, restore a deleted one.

import {
  announce,
  byId,
  downloadLink,
  failure,
  leaveTo,
  noteRestore,
  noteUrl,
  noteWrite,
  submitOnce,
} from "./shared.js";

function setUpNotesList() {
  const status = byId("notes-status");
  const form = byId("note-create");
  submitOnce(form, async () => {
    const path = form.elements.path.value;
    const result = await noteWrite(path, form.elements.content.value, 0);
    if (result.ok) return leaveTo(noteUrl(result.data.path));
    if (result.code === "VERSION_CONFLICT") {
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

if (byId("note-create")) setUpNotesList();
byId("notes-export")?.addEventListener("click", (event) => {
  downloadLink(event, byId("notes-export-status"), "Downloaded the notes archive.");
});
