// The Memory frame: the one memory document, with Clear, Undo and the memory mode.

import {
  DocumentEditor,
  announce,
  api,
  byId,
  byteLength,
  config,
  dialogChoice,
  downloadLink,
  element,
  failure,
} from "./shared.js";

const MODE_LABELS = { off: "Off", read_only: "Read only", auto: "Auto" };

// Undo steps back through history: after an Undo that restored version K (as new version
// V), the next Undo restores K - 1, not V - 1 (which would redo). Kept per tab, across
// reloads, and only while V is still the saved version: any other write starts over.
const undoKey = config ? `memory-undo:${config.workspaceId}` : "";

function undoTrail() {
  try {
    return JSON.parse(sessionStorage.getItem(undoKey) || "null");
  } catch {
    return null;
  }
}

class MemoryFrame extends DocumentEditor {
  constructor() {
    super({
      prefix: "memory",
      content: config.memory.content,
      version: config.memory.version,
      noun: "memory",
    });
    this.urls = config.urls;
    this.lastSaveAck = 0; // the version this page's own last write was acknowledged at
    this.policy = config.policy;
    this.wire({
      clear: () => this.clear(),
      "clear-retry": () => this.clear(),
      undo: () => this.undo(),
      mode: () => this.changeMode(),
    });
    this.part("download").addEventListener("click", (event) => {
      downloadLink(event, this.status, "Downloaded the saved memory (never an unsaved draft).");
    });
  }

  render() {
    super.render();
    const bytes = byteLength(this.textarea.value);
    this.part("oversize").hidden = bytes <= config.recallMaxBytes;
    const undo = this.part("undo");
    if (undo && !this.inFlight) undo.disabled = this.undoTarget() < 1;
  }

  // The version an Undo restores now (0: nothing earlier).
  undoTarget() {
    const trail = undoTrail();
    if (trail && trail.atVersion === this.baseVersion) return trail.restored - 1;
    return this.baseVersion - 1;
  }

  busyParts() {
    return [...super.busyParts(), "clear", "clear-retry", "undo"];
  }

  setBusy(isBusy) {
    super.setBusy(isBusy);
    if (!isBusy) this.render();
  }

  // A Save is never refused for what the instruction lint finds: the person sees the lines
  // the server's rules flag (the lint route, so the frame holds no copy of the rules) and
  // chooses. Only lines the draft adds or changes are shown, as a capture judges them.
  async save(options = {}) {
    if (!this.inFlight && this.isDirty && !(await this.confirmFlaggedLines())) {
      announce(this.status, "Not saved. Your draft is kept for you to edit.");
      return null;
    }
    return super.save(options);
  }

  async confirmFlaggedLines() {
    const content = this.textarea.value;
    const lint = await api("POST", this.urls.lint, { body: { content } });
    // The lint only advises: when it cannot answer, the Save goes ahead and answers itself.
    if (!lint.ok) return true;
    const lines = content.split("\n");
    const saved = new Set(this.baseText.split("\n"));
    const flagged = new Map();
    for (const finding of lint.data.findings) {
      const text = lines[finding.line - 1];
      if (saved.has(text)) continue;
      if (!flagged.has(finding.line)) flagged.set(finding.line, { text, findings: [] });
      flagged.get(finding.line).findings.push(finding);
    }
    if (flagged.size === 0) return true;
    byId("lint-dialog-findings").replaceChildren(
      ...[...flagged].map(([line, { text, findings }]) =>
        element("li", { className: "lint-finding", attrs: { "data-line": String(line) } }, [
          element("p", { className: "lint-line" }, [
            element("strong", { text: `Line ${line}: ` }),
            element("code", { text }),
          ]),
          element(
            "ul",
            {},
            findings.map((finding) =>
              element("li", { text: `${finding.message} (${finding.rule})` }),
            ),
          ),
        ]),
      ),
    );
    return (await dialogChoice(byId("lint-dialog"))) === "save";
  }

  write(content, base) {
    return api("PUT", this.urls.memory, {
      body: { content },
      headers: { "X-Base-Version": String(base) },
    });
  }

  readCurrent() {
    return api("GET", this.urls.memory);
  }

  afterAcknowledged(version) {
    this.lastSaveAck = version;
    this.part("clear-retry").hidden = true;
    this.announceChange();
  }

  adopt(version, content) {
    super.adopt(version, content);
    this.announceChange();
  }

  async showConflict(result) {
    await super.showConflict(result);
    this.announceChange();
  }

  // Panels beside the frame that depend on the saved memory, its mode or this page's
  // memory state (what the assistant will be given, where each line came from) listen for this.
  announceChange() {
    byId("memory-frame").dispatchEvent(new CustomEvent("memory-changed"));
  }

  // What X-Memory-State reports: only this page's own acknowledged writes, whether one is
  // still in flight, and whether the last one met a conflict not yet resolved.
  memoryState(isSaving) {
    const saving = isSaving ? 1 : 0;
    const conflict = this.hasUnresolvedConflict ? 1 : 0;
    return `version=${this.lastSaveAck}; saving=${saving}; conflict=${conflict}`;
  }

  // The exact text of a version we were acknowledged at.
  async acknowledgeVersion(version) {
    const revision = await api("GET", `${this.urls.versions}/${version}`);
    if (revision.ok) {
      this.acknowledge(version, revision.data.content, { replaceText: true });
    } else {
      const current = await this.readCurrent();
      if (current.ok) this.adopt(current.data.version, current.data.content);
    }
    this.hasUnresolvedConflict = false;
    this.afterAcknowledged(version);
  }

  async clear() {
    if (!(await this.resolveDraft("the Clear"))) return;
    await this.waitBeforeWrite();
    const base = this.baseVersion;
    this.setBusy(true);
    const result = await this.track(
      api("PUT", this.urls.memory, {
        body: { content: "" },
        headers: { "X-Base-Version": String(base), "X-Memory-Clear": "1" },
      }),
    );
    this.setBusy(false);
    if (result.ok) {
      this.hasUnresolvedConflict = false;
      this.acknowledge(result.data.version, "", { replaceText: true });
      this.afterAcknowledged(result.data.version);
    } else if (result.code === "VERSION_CONFLICT") {
      this.part("clear-retry").hidden = false;
    }
    const undo = base > 0 ? ` Undo brings back the text of version ${base}.` : "";
    await this.reportChange(this.status, "Not cleared", result, {
      done: (version) => `Cleared. The server holds version ${version}, which is empty.${undo}`,
      stale: " first, so nothing was cleared. The newer text is shown; press Retry Clear to clear it.",
    });
  }

  async undo() {
    if (!(await this.resolveDraft("the Undo"))) return;
    await this.waitBeforeWrite();
    const base = this.baseVersion;
    const restore = this.undoTarget();
    if (restore < 1) {
      announce(this.status, "Nothing to undo: there is no earlier revision.");
      return;
    }
    this.setBusy(true);
    const result = await this.track(
      api("PUT", this.urls.memory, {
        body: { restoreVersion: restore },
        headers: { "X-Base-Version": String(base) },
      }),
    );
    if (result.ok) {
      sessionStorage.setItem(
        undoKey,
        JSON.stringify({ atVersion: result.data.version, restored: restore }),
      );
      await this.acknowledgeVersion(result.data.version);
    }
    this.setBusy(false);
    await this.reportChange(this.status, "Not undone", result, {
      done: (version) => `Undone. Version ${version} restores the text of version ${restore}.`,
      stale: " first, so nothing changed. The newer text is shown; press Undo again to step back from it.",
    });
  }

  // In `status`, how a change of memory other than a Save went (a Clear, an Undo, an applied
  // suggestion): `done(version)` once made; when memory moved first, the newer text and
  // what to do next (`stale`, after the version it moved to); else the refusal, and that
  // nothing changed.
  async reportChange(status, verb, result, { done, stale }) {
    if (result.ok) {
      announce(status, done(result.data.version), "success");
    } else if (result.code === "VERSION_CONFLICT") {
      const moved = ` Memory changed to version ${result.detail.currentVersion}`;
      await this.refusedAsStale(status, verb, result, moved + stale);
    } else {
      announce(status, failure(verb, result, " Nothing changed."), "error");
    }
  }

  async changeMode() {
    const status = this.part("mode-status");
    const form = this.part("mode");
    const mode = form.elements.mode.value;
    if (mode === this.policy.mode) {
      announce(status, `Memory mode is already ${MODE_LABELS[mode]}.`);
      return;
    }
    const submit = this.part("mode-submit");
    submit.disabled = true;
    const result = await api("PUT", this.urls.policy, {
      body: { mode, expectedRevision: this.policy.policyRevision },
    });
    submit.disabled = false;
    if (result.ok) {
      this.showPolicy(result.data);
      const sentence = byId(`mode-${mode}-sentence`)?.textContent ?? "";
      announce(status, `Memory mode is now ${MODE_LABELS[mode]}. ${sentence}`, "success");
      return;
    }
    if (result.code === "POLICY_REVISION_CONFLICT") {
      const current = await api("GET", this.urls.policy);
      if (current.ok) this.showPolicy(current.data);
      announce(
        status,
        failure(
          "Mode not changed",
          result,
          ` It is ${MODE_LABELS[this.policy.mode]} now.`,
        ),
        "error",
      );
      return;
    }
    announce(status, failure("Mode not changed", result), "error");
  }

  showPolicy(policy) {
    this.policy = { mode: policy.mode, policyRevision: policy.policyRevision };
    this.part("mode-current").textContent = MODE_LABELS[policy.mode];
    const radio = byId(`mode-${policy.mode}`);
    if (radio) radio.checked = true;
    this.announceChange();
  }
}

// The Assistant panel beside it (assistant.js) follows this frame's saves.
export const memoryFrame = byId("memory-frame") && config ? new MemoryFrame() : null;

// A panel beside the frame (the assistant's, the lines' origins): it follows the frame,
// speaks in its own status region `#<name>-status` and links to the revisions it names.
export class FramePanel {
  constructor(frame, name) {
    this.frame = frame;
    this.urls = config.urls;
    this.status = byId(`${name}-status`);
  }

  revisionUrl(version) {
    return `${this.urls.changes}${version}/`;
  }
}
