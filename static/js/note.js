// A note's editor: Save, Delete, Restore and Move of one note.

import {
  DocumentEditor,
  announce,
  api,
  byId,
  config,
  documentUrl,
  failure,
  noteRestore,
  noteUrl,
  noteWrite,
} from "./shared.js";

class NoteEditor extends DocumentEditor {
  constructor() {
    const note = config.note;
    super({ prefix: "note", content: note.content, version: note.version, noun: "note" });
    this.path = note.path;
    this.isDeleted = note.deleted;
    this.wire({
      delete: () => this.remove(),
      restore: () => this.restore(),
      move: () => this.move(),
    });
  }

  busyParts() {
    return [...super.busyParts(), "delete", "restore"];
  }

  write(content, base) {
    return noteWrite(this.path, content, base);
  }

  readCurrent() {
    return api("GET", documentUrl(this.path));
  }

  // A save's VERSION_CONFLICT does not say whether the note was deleted (a delete's, restore's
  // or move's does), and a deleted note reads as NOT_FOUND: it is shown deleted, the draft
  // still in the box, rather than compared with a text that cannot be loaded.
  async showConflict(result) {
    const current = await this.readCurrent();
    if (current.code !== "NOT_FOUND") {
      await super.showConflict(result);
      return;
    }
    result.detail.deleted = true;
    this.showDeleted(true);
  }

  async save(options) {
    const result = await super.save(options);
    if (result?.detail?.deleted) {
      announce(
        this.status,
        "Not saved: It was deleted elsewhere first. Your draft is kept: Restore brings the " +
          `note back, then Save. (${result.code})`,
        "error",
      );
    }
    return result;
  }

  showDeleted(isDeleted) {
    this.isDeleted = isDeleted;
    this.textarea.readOnly = isDeleted;
    for (const name of ["save", "discard", "delete", "move"]) this.part(name).hidden = isDeleted;
    this.part("restore").hidden = !isDeleted;
    this.part("deleted-badge").hidden = !isDeleted;
  }

  async remove() {
    const result = await this.deleteAt(documentUrl(this.path));
    if (result === null) return;
    if (result.ok) {
      this.showDeleted(true);
      announce(this.status, "Deleted. Its revisions are kept; Restore brings it back.", "success");
    } else if (result.code === "VERSION_CONFLICT" && result.detail.deleted) {
      this.showDeleted(true);
      announce(this.status, failure("Not deleted", result), "error");
    } else {
      await this.deleteRefused(result);
    }
  }

  async restore() {
    this.setBusy(true);
    const result = await this.track(noteRestore(this.path, this.baseVersion));
    this.setBusy(false);
    if (!result.ok) {
      announce(this.status, failure("Not restored", result), "error");
      return;
    }
    const current = await this.readCurrent();
    // A draft kept when a save met the deletion stays, now over the restored text.
    if (current.ok) {
      this.acknowledge(current.data.version, current.data.content, { replaceText: !this.isDirty });
    }
    this.showDeleted(false);
    announce(this.status, `Restored at version ${result.data.version}.`, "success");
  }

  async move() {
    const destination = this.part("move-to").value;
    if (destination === this.path) {
      announce(this.status, "Choose a different path to move to.");
      return;
    }
    if (!(await this.resolveDraft("the move"))) return;
    await this.waitBeforeWrite();
    const result = await api("POST", config.urls.documentsMove, {
      body: { from: this.path, to: destination },
      headers: { "X-Base-Version": String(this.baseVersion) },
    });
    if (result.ok) {
      window.location.assign(noteUrl(result.data.path));
      return;
    }
    announce(this.status, failure("Not moved", result), "error");
  }
}

if (byId("note-editor") && config) new NoteEditor();
