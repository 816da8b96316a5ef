// "What the assistant will be given": the memory block the next model call would receive,
// from the same decision and rendering as the call itself (the preview route), refreshed
// whenever the Memory frame saves, clears, undoes, changes mode or meets a conflict.

import { memoryFrame } from "./memory.js";
import { api, byId, config, failure } from "./shared.js";

// What the status means for the next message, in plain words (the block itself follows).
const SUMMARIES = {
  provided: (version) => `Saved version ${version} is given to the assistant, as below.`,
  off: () => "Nothing: memory is off, so no memory block is added at all.",
  empty: () => "Nothing: memory is empty, so no memory block is added at all.",
  pending: () => "Withheld while your save is still in flight; the assistant is told why:",
  conflict: () =>
    "Withheld until you resolve the conflict with the saved memory; the assistant is told why:",
  stale: () =>
    "Withheld: this page saw a version the server does not hold; the assistant is told why:",
  oversized: () =>
    "Withheld: memory is over the size bound (shorten it to have it used); the assistant " +
    "is told why:",
  deleted: () => "Withheld: the memory document was deleted; the assistant is told why:",
  unavailable: () =>
    "Withheld: no live key session in this browser, or the saved revision failed its " +
    "integrity check; the assistant is told why:",
  no_access: () =>
    "Withheld: workspace AI is off or you no longer have access; the assistant is told why:",
};

class PreviewPanel {
  constructor(section, frame) {
    this.section = section;
    this.frame = frame;
    this.summary = byId("memory-preview-summary");
    this.block = byId("memory-preview-block");
    this.latest = 0; // answers to older requests are dropped
    byId("memory-preview-refresh").addEventListener("click", () => this.refresh());
    byId("memory-frame").addEventListener("memory-changed", () => this.refresh());
    this.refresh();
  }

  // The headers a send from this page would carry now, so the answer is that send's.
  headers() {
    const headers = { "X-Memory-State": this.frame.memoryState(Boolean(this.frame.inFlight)) };
    if (config.keySessionId) headers["X-Key-Session"] = config.keySessionId;
    return headers;
  }

  async refresh() {
    const request = ++this.latest;
    const result = await api("GET", this.section.dataset.url, { headers: this.headers() });
    if (request !== this.latest) return;
    this.section.dataset.ready = "1";
    if (!result.ok) {
      delete this.section.dataset.status;
      this.summary.textContent = failure("The preview could not be loaded", result);
      this.block.hidden = true;
      return;
    }
    const { status, version, block } = result.data;
    this.section.dataset.status = status;
    this.summary.textContent = SUMMARIES[status](version);
    // As text, never markup: the block is shown exactly as the model reads it.
    this.block.textContent = block;
    this.block.hidden = block === "";
  }
}

const section = byId("memory-preview");
if (section && memoryFrame) new PreviewPanel(section, memoryFrame);
