// What every page of the Workspace Memory web frame shares: plain ES modules, no build step.
// base.html loads this module on every page; a page (or a partial) that needs more loads
// its own module, which imports what it uses from here.
//
// Human writes are explicit online saves: each Save, Clear, Undo or Apply is one direct
// request with X-Base-Version. On success the page knows the exact version the server
// acknowledged; on any failure nothing changes and the draft stays. Nothing is queued.
// The assistant is told only about this page's own acknowledged Saves (X-Memory-State),
// never about the unsaved draft.

import { sentence } from "./errors.js";
import { diff3Merge, diffComm } from "../vendor/node-diff3-3.2.1.js";

export const byId = (id) => document.getElementById(id);
const encoder = new TextEncoder();
export const byteLength = (text) => encoder.encode(text).length;
const MARKDOWN = "text/markdown; charset=utf-8";
// Read at each write, not once at load: signing in again (in another tab, after the session
// ended) rotates the token, and a page still holding a draft must send the new one.
// "csrftoken" is Django's CSRF_COOKIE_NAME, which the settings leave as it is.
function csrfToken() {
  const cookie = document.cookie.split("; ").find((pair) => pair.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : "";
}
const configElement = byId("frame-config");
export const config = configElement ? JSON.parse(configElement.textContent) : null;

// ---- plumbing -------------------------------------------------------------------------

// `body` is sent as JSON, `markdown` as the raw text of a memory space's document; a
// Markdown answer comes back as text in `data`, with the response's `headers`.
export async function api(method, url, { body, markdown, archive, headers = {} } = {}) {
  const init = {
    method,
    credentials: "same-origin",
    headers: { Accept: "application/json", ...headers },
  };
  if (method !== "GET") init.headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (markdown !== undefined) {
    init.headers["Content-Type"] = MARKDOWN;
    init.body = markdown;
  }
  if (archive !== undefined) {
    init.headers["Content-Type"] = "application/gzip";
    init.body = archive;
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    return {
      ok: false,
      status: 0,
      code: "NETWORK_ERROR",
      message: "The server could not be reached; nothing was changed.",
      detail: {},
    };
  }
  let data = null;
  if (response.status !== 204) {
    const isMarkdown = (response.headers.get("Content-Type") ?? "").startsWith("text/markdown");
    try {
      data = isMarkdown ? await response.text() : await response.json();
    } catch {
      data = null;
    }
  }
  if (response.ok) return { ok: true, status: response.status, data, headers: response.headers };
  const error = (data && data.error) || {};
  return {
    ok: false,
    status: response.status,
    code: error.code || `HTTP_${response.status}`,
    message: error.message || response.statusText,
    detail: error.detail || {},
  };
}

// Every row of a list route: each answers one cursor page `{results, next, previous}`, and
// `next` is followed as given until it is null. Answers like `api`, with the rows as `data`.
export async function listAll(url) {
  const rows = [];
  for (let next = url; next; ) {
    const page = await api("GET", next);
    if (!page.ok) return page;
    rows.push(...page.data.results);
    next = page.data.next;
  }
  return { ok: true, status: 200, data: rows };
}

// A download link's file, fetched first so that a refusal (a credential in a note, a session
// that ended) is said in `status` in words instead of saved as a file or a failed download;
// only a whole file is handed to the browser, under the name the server gave it.
export async function downloadLink(event, status, done) {
  event.preventDefault();
  const link = event.currentTarget;
  announce(status, "Preparing the download…", "info", { focus: false });
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
  const url = URL.createObjectURL(await response.blob());
  const save = document.createElement("a");
  save.href = url;
  save.download = attachmentName(response) ?? link.getAttribute("download");
  save.click();
  URL.revokeObjectURL(url);
  announce(status, done, "success", { focus: false });
}

// The file name of an attachment: `filename*` (RFC 6266, any script) before `filename`.
function attachmentName(response) {
  const header = response.headers.get("Content-Disposition") ?? "";
  const encoded = /filename\*=utf-8''([^;]+)/i.exec(header);
  if (encoded) return decodeURIComponent(encoded[1]);
  return /filename="([^"]+)"/.exec(header)?.[1] ?? null;
}

// A new element with its class, text, attributes and children.
export function element(tag, { className, text, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

// What an action of `submitOnce` returns when it has sent the browser to another page.
export const LEAVING = Symbol("leaving");

// Go to `url` from an action of `submitOnce`: `return leaveTo(url);`.
export function leaveTo(url) {
  window.location.assign(url);
  return LEAVING;
}

// Run `action` on each submit of `form` (not leaving the page), its submit button off until
// the action settles: pressed twice (a double-click), the form would send its request twice.
// An action that leaves the page (`leaveTo`) keeps it off: the next page takes a while to
// load, and a click meanwhile would send the request again. If the browser brings this page
// back from its history cache, the button is on again.
export function submitOnce(form, action) {
  const submit = form.querySelector('button[type="submit"]');
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (submit.disabled) return;
    submit.disabled = true;
    let outcome;
    try {
      outcome = await action(event);
    } finally {
      if (outcome !== LEAVING) submit.disabled = false;
    }
  });
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) submit.disabled = false;
  });
}

// Put a result in a status region; by default move focus there, so keyboard and screen
// reader users land on the outcome of what they just did.
export function announce(region, text, kind = "info", { focus = true } = {}) {
  if (!region) return;
  region.textContent = text;
  region.dataset.kind = kind;
  if (focus) region.focus();
}

// "Not saved: <what happened and what to do>. <suffix> (CODE)": the code stays, last, for
// a report to support.
export function failure(verb, result, suffix = "") {
  return `${verb}: ${sentence(result)}${suffix} (${result.code})`;
}

// Save / Discard / Cancel before an action that would otherwise lose or bypass a draft.
function askDraftDecision(purpose) {
  const dialog = byId("draft-dialog");
  if (!dialog) return Promise.resolve("cancel");
  byId("draft-dialog-text").textContent =
    `Your draft is not saved. Save it first, discard it, or cancel ${purpose}?`;
  return dialogChoice(dialog);
}

// Show a modal `dialog` whose buttons carry a `value`; resolves with the value pressed, or
// "cancel" on Escape. The Cancel button has the focus, so Enter never confirms by accident.
export function dialogChoice(dialog) {
  return new Promise((resolve) => {
    const buttons = dialog.querySelectorAll("button[value]");
    const finish = (value) => {
      buttons.forEach((button) => button.removeEventListener("click", onClick));
      dialog.removeEventListener("cancel", onCancel);
      dialog.close();
      resolve(value);
    };
    const onClick = (event) => finish(event.currentTarget.value);
    const onCancel = (event) => {
      event.preventDefault();
      finish("cancel");
    };
    buttons.forEach((button) => button.addEventListener("click", onClick));
    dialog.addEventListener("cancel", onCancel);
    dialog.showModal();
    dialog.querySelector('button[value="cancel"]').focus();
  });
}

// ---- an editor of one saved document (the memory document or a note) ---------------------

export class DocumentEditor {
  constructor({ prefix, content, version, noun }) {
    this.prefix = prefix;
    this.noun = noun;
    this.textarea = this.part("text");
    this.status = this.part("status");
    this.baseVersion = version; // the version the draft is based on
    this.baseText = content; // that version's exact text
    this.inFlight = null; // the write in progress, if any
    this.conflict = null; // {version, content} the server holds after a conflicting Save
    this.hasUnresolvedConflict = false;
    this.textarea.value = content;
    this.textarea.addEventListener("input", () => this.render());
    this.wire({
      save: () => this.save(),
      discard: () => this.discard(),
      "use-theirs": () => this.useTheirs(),
      "keep-mine": () => this.keepMine(),
      merge: () => this.merge(),
      "merge-save": () => this.saveMerged(),
      "merge-cancel": () => this.cancelMerge(),
      "stale-load": () => this.catchUp(),
    });
    // Ctrl+S (Cmd+S on a Mac) saves, as in any editor, instead of saving the web page.
    document.addEventListener("keydown", (event) => {
      if (!(event.ctrlKey || event.metaKey) || event.key.toLowerCase() !== "s") return;
      if (!this.hasDocument()) return;
      event.preventDefault();
      if (!this.part("merge-review").hidden && event.target === this.part("merge-text")) {
        this.saveMerged();
      } else {
        this.save();
      }
    });
    // A tab coming back to the front asks whether a newer version was saved meanwhile.
    window.addEventListener("focus", () => this.checkForNewer());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.checkForNewer();
    });
    window.addEventListener("beforeunload", (event) => {
      if (this.isDirty) {
        event.preventDefault();
        event.returnValue = "";
      }
    });
    this.render();
  }

  part(name) {
    return byId(`${this.prefix}-${name}`);
  }

  // Each part named in `actions` runs its action when pressed, or, a form, when submitted
  // (without leaving the page).
  wire(actions) {
    for (const [name, action] of Object.entries(actions)) {
      const part = this.part(name);
      if (part instanceof HTMLFormElement) {
        part.addEventListener("submit", (event) => {
          event.preventDefault();
          action();
        });
      } else {
        part.addEventListener("click", action);
      }
    }
  }

  get isDirty() {
    return this.textarea.value !== this.baseText;
  }

  render() {
    this.part("bytes").textContent = String(byteLength(this.textarea.value));
    this.part("version").textContent = String(this.baseVersion);
    this.part("dirty").hidden = !this.isDirty;
  }

  setBusy(isBusy) {
    for (const name of this.busyParts()) {
      const control = this.part(name);
      if (control) control.disabled = isBusy;
    }
  }

  busyParts() {
    return ["save", "keep-mine", "use-theirs", "merge", "merge-save"];
  }

  // A write of ours was acknowledged at `version`, holding exactly `content`.
  acknowledge(version, content, { replaceText = false } = {}) {
    this.baseVersion = version;
    this.baseText = content;
    if (replaceText) this.textarea.value = content;
    this.hideConflict();
    this.render();
  }

  // Take the server's text as the new base (not a write of ours).
  adopt(version, content) {
    this.baseVersion = version;
    this.baseText = content;
    this.textarea.value = content;
    this.hideConflict();
    this.render();
  }

  async track(promise) {
    this.inFlight = promise;
    try {
      return await promise;
    } finally {
      if (this.inFlight === promise) this.inFlight = null;
    }
  }

  // Wait for an in-flight write, at most `ms`. True if none is left in flight.
  async waitForWrite(ms) {
    if (!this.inFlight) return true;
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const settled = this.inFlight.then(
      () => true,
      () => true,
    );
    const done = await Promise.race([settled, timeout]);
    clearTimeout(timer);
    return done && !this.inFlight;
  }

  async save({ base = this.baseVersion } = {}) {
    if (this.inFlight) {
      announce(this.status, "A save is already in progress; wait for it to finish.");
      return null;
    }
    const content = this.textarea.value;
    if (!this.isDirty && base === this.baseVersion) {
      announce(this.status, `Nothing to save: the text matches version ${this.baseVersion}.`);
      return null;
    }
    this.setBusy(true);
    const result = await this.track(this.write(content, base));
    this.setBusy(false);
    if (result.ok) {
      this.hasUnresolvedConflict = false;
      this.acknowledge(result.data.version, content);
      this.afterAcknowledged(result.data.version);
      announce(this.status, `Saved. The server holds version ${result.data.version}.`, "success");
    } else if (result.code === "VERSION_CONFLICT") {
      this.hasUnresolvedConflict = true;
      await this.showConflict(result);
      announce(this.status, failure("Not saved", result, " Your draft is kept."), "error");
    } else {
      announce(this.status, failure("Not saved", result, " Your draft is kept."), "error");
    }
    return result;
  }

  afterAcknowledged(_version) {}

  discard() {
    this.textarea.value = this.baseText;
    this.render();
    announce(this.status, `Discarded. The text is back to version ${this.baseVersion}.`);
  }

  async showConflict(result) {
    const current = await this.readCurrent();
    this.conflict = current.ok
      ? { version: current.data.version, content: current.data.content }
      : { version: result.detail.currentVersion, content: null };
    if (this.conflict.content === null) {
      this.part("conflict-theirs").textContent =
        `(The saved text could not be loaded: ${current.code}.)`;
      this.part("conflict-mine").textContent = this.textarea.value;
    } else {
      showDifferences(
        this.part("conflict-theirs"),
        this.part("conflict-mine"),
        this.conflict.content,
        this.textarea.value,
      );
    }
    this.part("merge").disabled = this.conflict.content === null;
    this.part("merge-review").hidden = true;
    this.part("stale").hidden = true;
    this.part("conflict-summary").textContent =
      `Version ${this.conflict.version} was saved elsewhere after the version ` +
      `${this.baseVersion} your draft is based on. Nothing of yours was written.`;
    this.part("conflict").hidden = false;
  }

  hideConflict() {
    this.conflict = null;
    this.part("conflict").hidden = true;
    this.part("merge-review").hidden = true;
    this.part("stale").hidden = true;
  }

  // A three-way merge of the draft and the saved text from the version the draft is based
  // on, put up for review: nothing is saved until the person presses Save merged text.
  merge() {
    if (!this.conflict || this.conflict.content === null) return;
    const merged = mergeThreeWay(this.baseText, this.textarea.value, this.conflict.content, {
      mine: "your draft",
      theirs: `saved version ${this.conflict.version}`,
    });
    this.part("merge-text").value = merged.text;
    this.part("merge-summary").textContent = merged.conflicts
      ? `${merged.conflicts} ${merged.conflicts === 1 ? "place was" : "places were"} changed ` +
        "on both sides; each is marked between <<<<<<< and >>>>>>> lines. Keep what you " +
        "want there, remove the marker lines, then save."
      : `Your changes and those of version ${this.conflict.version} were combined` +
        (merged.bothAdded ? " (where both added lines at the same place, both are kept)" : "") +
        ". Check the result, then save.";
    this.part("merge-review").hidden = false;
    this.part("merge-heading").focus();
  }

  async saveMerged() {
    if (!this.conflict) return;
    const text = this.part("merge-text").value;
    if (/^(<{7}|>{7}|={7})( |$)/m.test(text)) {
      announce(
        this.status,
        "Not saved: the merged text still has <<<<<<<, ======= or >>>>>>> marker lines. " +
          "Resolve each marked place first.",
        "error",
      );
      return;
    }
    this.textarea.value = text;
    this.render();
    await this.save({ base: this.conflict.version });
  }

  cancelMerge() {
    this.part("merge-review").hidden = true;
    this.part("merge").focus();
  }

  // On focus: tell a tab that is behind, before it saves into a conflict.
  async checkForNewer() {
    if (this.inFlight || this.conflict || !this.hasDocument()) return;
    const current = await this.readCurrent();
    if (!current.ok || this.inFlight || this.conflict) return;
    const { version } = current.data;
    const notice = this.part("stale");
    if (version <= this.baseVersion) {
      notice.hidden = true;
      return;
    }
    this.newer = current.data;
    this.part("stale-text").textContent = this.isDirty
      ? `A newer version (${version}) was saved elsewhere after version ${this.baseVersion}, ` +
        "which your draft is based on. Compare now to merge your draft into it."
      : `A newer version (${version}) was saved elsewhere; this tab shows version ` +
        `${this.baseVersion}.`;
    this.part("stale-load").textContent = this.isDirty
      ? "Compare and merge"
      : `Show version ${version}`;
    notice.hidden = false;
  }

  hasDocument() {
    return true;
  }

  async catchUp() {
    const newer = this.newer;
    this.part("stale").hidden = true;
    if (!newer) return;
    if (this.isDirty) {
      this.hasUnresolvedConflict = true;
      await this.showConflict({ detail: { currentVersion: newer.version } });
      this.part("conflict-heading").scrollIntoView({ block: "start" });
      return;
    }
    this.adopt(newer.version, newer.content);
    announce(this.status, `Showing version ${newer.version}, the one saved now.`);
  }

  useTheirs() {
    if (!this.conflict) return;
    if (this.conflict.content === null) {
      announce(this.status, "The saved text could not be loaded; reload the page to see it.");
      return;
    }
    const { version, content } = this.conflict;
    this.hasUnresolvedConflict = false;
    this.adopt(version, content);
    announce(this.status, `Using version ${version}. Your draft was discarded.`);
  }

  async keepMine() {
    if (!this.conflict) return;
    await this.save({ base: this.conflict.version });
  }

  // After a refused write: show the newer text if there is no draft to keep, or the
  // conflict banner if there is.
  async showNewer(result) {
    if (this.isDirty) {
      this.hasUnresolvedConflict = true;
      await this.showConflict(result);
      return;
    }
    const current = await this.readCurrent();
    if (current.ok) {
      this.hasUnresolvedConflict = false;
      this.adopt(current.data.version, current.data.content);
    }
  }

  // A write refused because the document moved first: show the newer text (or the
  // conflict banner over a draft), then say in `status` what was not done and what next
  // (`suffix`, which says it better than the code's general sentence).
  async refusedAsStale(status, verb, result, suffix) {
    await this.showNewer(result);
    announce(status, `${verb}:${suffix} (${result.code})`, "error");
  }

  // Resolve an unsaved draft before `purpose`; true to go ahead.
  async resolveDraft(purpose) {
    if (!this.isDirty) return true;
    const decision = await askDraftDecision(purpose);
    if (decision === "save") {
      const result = await this.save();
      return Boolean(result && result.ok);
    }
    if (decision === "discard") {
      this.textarea.value = this.baseText;
      this.render();
      return true;
    }
    announce(this.status, `Cancelled ${purpose}. Your draft is kept.`);
    return false;
  }

  // Delete the document at `url` on the draft's base version, once the draft is resolved:
  // the answer, or null if the user cancelled.
  async deleteAt(url) {
    if (!(await this.resolveDraft("the delete"))) return null;
    await this.waitBeforeWrite();
    this.setBusy(true);
    const result = await this.track(
      api("DELETE", url, { headers: { "X-Base-Version": String(this.baseVersion) } }),
    );
    this.setBusy(false);
    return result;
  }

  // After a refused delete: a document that changed first shows its newer text.
  async deleteRefused(result) {
    if (result.code !== "VERSION_CONFLICT") {
      announce(this.status, failure("Not deleted", result), "error");
      return;
    }
    await this.refusedAsStale(
      this.status,
      "Not deleted",
      result,
      " It changed first; check the newer text, then retry.",
    );
  }

  async waitBeforeWrite() {
    if (!this.inFlight) return;
    announce(this.status, "Waiting for the save in progress…", "info", { focus: false });
    await this.inFlight.catch(() => null);
  }
}

// ---- comparing and merging ----------------------------------------------------------------

const lines = (text) => text.split("\n");

// Fill two <pre> blocks with `theirs` and `mine`, each line that is on one side only marked.
// The blocks' text stays exactly the two texts.
function showDifferences(theirsBlock, mineBlock, theirs, mine) {
  const theirsParts = [];
  const mineParts = [];
  for (const region of diffComm(lines(theirs), lines(mine))) {
    if (region.common) {
      theirsParts.push(...region.common.map((line) => [line, false]));
      mineParts.push(...region.common.map((line) => [line, false]));
    } else {
      theirsParts.push(...region.buffer1.map((line) => [line, true]));
      mineParts.push(...region.buffer2.map((line) => [line, true]));
    }
  }
  fillLines(theirsBlock, theirsParts);
  fillLines(mineBlock, mineParts);
}

function fillLines(block, parts) {
  block.replaceChildren(
    ...parts.map(([line, differs], index) => {
      const text = index < parts.length - 1 ? `${line}\n` : line;
      if (!differs) return document.createTextNode(text);
      const mark = document.createElement("mark");
      mark.className = "line-differs";
      mark.textContent = text;
      return mark;
    }),
  );
}

// The three-way merge of `mine` and `theirs` from their common `base`, line by line: what
// only one side changed is taken; where both only added lines at the same place, both
// additions are kept (theirs first: they were saved first); a place both changed
// differently is kept with both sides between marker lines for the person to settle.
// Returns {text, conflicts, bothAdded}.
export function mergeThreeWay(base, mine, theirs, labels) {
  const out = [];
  let conflicts = 0;
  let bothAdded = 0;
  for (const region of diff3Merge(lines(mine), lines(base), lines(theirs))) {
    if (region.ok) {
      out.push(...region.ok);
    } else if (region.conflict.o.length === 0) {
      bothAdded += 1;
      out.push(...region.conflict.b, ...region.conflict.a);
    } else {
      conflicts += 1;
      out.push(
        `<<<<<<< ${labels.mine}`,
        ...region.conflict.a,
        "=======",
        ...region.conflict.b,
        `>>>>>>> ${labels.theirs}`,
      );
    }
  }
  return { text: out.join("\n"), conflicts, bothAdded };
}

// ---- notes (the Notes list and a note's editor) --------------------------------------------

export function documentUrl(path) {
  return `${config.urls.documents}?path=${encodeURIComponent(path)}`;
}

// Write a note's text on version `base` (0 creates it).
export function noteWrite(path, content, base) {
  return api("PUT", documentUrl(path), {
    body: { content },
    headers: { "X-Base-Version": String(base) },
  });
}

export function noteRestore(path, base) {
  return api("POST", config.urls.documentsRestore, {
    body: { path },
    headers: { "X-Base-Version": String(base) },
  });
}

export function noteUrl(path) {
  return `${config.urls.note}?path=${encodeURIComponent(path)}`;
}

// ---- start ---------------------------------------------------------------------------------

// Module scripts run, in document order, before DOMContentLoaded: by then every page module
// has set its page up, so the page is ready for input.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelector("[data-focus-on-load]")?.focus();
  document.documentElement.dataset.frameReady = "1";
});
