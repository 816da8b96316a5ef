// The Workspace Memory web frame: one plain module, no build step.
//
// Human writes are explicit online saves: each Save, Clear, Undo or Apply is one direct
// request with X-Base-Version. On success the page knows the exact version the server
// acknowledged; on any failure nothing changes and the draft stays. Nothing is queued.
// The assistant is told only about this page's own acknowledged Saves (X-Memory-State),
// never about the unsaved draft.

const byId = (id) => document.getElementById(id);
const encoder = new TextEncoder();
const byteLength = (text) => encoder.encode(text).length;
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const configElement = byId("frame-config");
const config = configElement ? JSON.parse(configElement.textContent) : null;

const SEND_WAIT_FOR_SAVE_MS = 5000;
const TURN_POLL_MS = 1000;
const TURN_POLL_LIMIT = 30;

const MODE_LABELS = { off: "Off", read_only: "Read only", auto: "Auto" };

// Why a model call was given no memory, in plain words (the receipt's recallStatus).
const WITHHELD_REASONS = {
  off: "Memory not used: memory is off.",
  empty: "Memory not used: memory was empty.",
  pending: "Memory withheld: your save was still in flight when you sent this.",
  conflict: "Memory withheld: your last save met a conflict you had not resolved.",
  stale: "Memory withheld: this page saw a version the server does not hold.",
  oversized: "Memory withheld: it is over the size bound; shorten it to have it used.",
  deleted: "Memory withheld: the memory document was deleted.",
  unavailable: "Memory withheld: no live key session (open one in Settings).",
  no_access: "Memory withheld: no workspace access, or workspace AI is off.",
  superseded: "Memory withheld: a newer message took over this conversation.",
};

// ---- plumbing -------------------------------------------------------------------------

async function api(method, url, { body, headers = {} } = {}) {
  const init = {
    method,
    credentials: "same-origin",
    headers: { Accept: "application/json", ...headers },
  };
  if (method !== "GET") init.headers["X-CSRFToken"] = csrfToken;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
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
    try {
      data = await response.json();
    } catch {
      data = null;
    }
  }
  if (response.ok) return { ok: true, status: response.status, data };
  const error = (data && data.error) || {};
  return {
    ok: false,
    status: response.status,
    code: error.code || `HTTP_${response.status}`,
    message: error.message || response.statusText,
    detail: error.detail || {},
  };
}

// Put a result in a status region; by default move focus there, so keyboard and screen
// reader users land on the outcome of what they just did.
function announce(region, text, kind = "info", { focus = true } = {}) {
  if (!region) return;
  region.textContent = text;
  region.dataset.kind = kind;
  if (focus) region.focus();
}

function failure(verb, result, suffix = "") {
  return `${verb}: ${result.code} — ${result.message}${suffix}`;
}

function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function element(tag, { className, text, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

// Save / Discard / Cancel before an action that would otherwise lose or bypass a draft.
function askDraftDecision(purpose) {
  const dialog = byId("draft-dialog");
  if (!dialog) return Promise.resolve("cancel");
  byId("draft-dialog-text").textContent =
    `Your draft is not saved. Save it first, discard it, or cancel ${purpose}?`;
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

class DocumentEditor {
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
    this.part("save").addEventListener("click", () => this.save());
    this.part("discard").addEventListener("click", () => this.discard());
    this.part("use-theirs").addEventListener("click", () => this.useTheirs());
    this.part("keep-mine").addEventListener("click", () => this.keepMine());
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
    return ["save", "keep-mine", "use-theirs"];
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
      const held = result.detail.currentVersion;
      announce(
        this.status,
        failure("Not saved", result, ` Version ${held} is saved now. Your draft is kept.`),
        "error",
      );
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
    this.part("conflict-theirs").textContent =
      this.conflict.content ?? `(The saved text could not be loaded: ${current.code}.)`;
    this.part("conflict-mine").textContent = this.textarea.value;
    this.part("conflict-summary").textContent =
      `Version ${this.conflict.version} was saved elsewhere after the version ` +
      `${this.baseVersion} your draft is based on. Nothing of yours was written.`;
    this.part("conflict").hidden = false;
  }

  hideConflict() {
    this.conflict = null;
    this.part("conflict").hidden = true;
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

  async waitBeforeWrite() {
    if (!this.inFlight) return;
    announce(this.status, "Waiting for the save in progress…", "info", { focus: false });
    await this.inFlight.catch(() => null);
  }
}

// ---- the Memory frame -------------------------------------------------------------------

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
    this.part("clear").addEventListener("click", () => this.clear());
    this.part("clear-retry").addEventListener("click", () => this.clear());
    this.part("undo").addEventListener("click", () => this.undo());
    this.part("mode").addEventListener("submit", (event) => {
      event.preventDefault();
      this.changeMode();
    });
  }

  render() {
    super.render();
    const bytes = byteLength(this.textarea.value);
    this.part("oversize").hidden = bytes <= config.recallMaxBytes;
    const undo = this.part("undo");
    if (undo && !this.inFlight) undo.disabled = this.baseVersion < 2;
  }

  busyParts() {
    return [...super.busyParts(), "clear", "clear-retry", "undo"];
  }

  setBusy(isBusy) {
    super.setBusy(isBusy);
    if (!isBusy) this.render();
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
      const undo = base > 0 ? ` Undo brings back the text of version ${base}.` : "";
      announce(
        this.status,
        `Cleared. The server holds version ${result.data.version}, which is empty.${undo}`,
        "success",
      );
    } else if (result.code === "VERSION_CONFLICT") {
      await this.showNewer(result);
      this.part("clear-retry").hidden = false;
      announce(
        this.status,
        failure(
          "Not cleared",
          result,
          ` Memory changed to version ${result.detail.currentVersion} first, so nothing was ` +
            "cleared. The newer text is shown; press Retry Clear to clear it.",
        ),
        "error",
      );
    } else {
      announce(this.status, failure("Not cleared", result, " Nothing changed."), "error");
    }
  }

  async undo() {
    if (!(await this.resolveDraft("the Undo"))) return;
    await this.waitBeforeWrite();
    const base = this.baseVersion;
    if (base < 2) {
      announce(this.status, "Nothing to undo: there is no earlier revision.");
      return;
    }
    const restore = base - 1;
    this.setBusy(true);
    const result = await this.track(
      api("PUT", this.urls.memory, {
        body: { restoreVersion: restore },
        headers: { "X-Base-Version": String(base) },
      }),
    );
    if (result.ok) await this.acknowledgeVersion(result.data.version);
    this.setBusy(false);
    if (result.ok) {
      announce(
        this.status,
        `Undone. Version ${result.data.version} restores the text of version ${restore}.`,
        "success",
      );
    } else if (result.code === "VERSION_CONFLICT") {
      await this.showNewer(result);
      announce(
        this.status,
        failure(
          "Not undone",
          result,
          ` Memory changed to version ${result.detail.currentVersion} first, so nothing ` +
            "changed. The newer text is shown; press Undo again to restore the one before it.",
        ),
        "error",
      );
    } else {
      announce(this.status, failure("Not undone", result, " Nothing changed."), "error");
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
          ` It is ${MODE_LABELS[this.policy.mode]} now; choose again.`,
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
  }
}

// ---- the Assistant panel ------------------------------------------------------------------

class AssistantPanel {
  constructor(frame) {
    this.frame = frame;
    this.urls = config.urls;
    this.status = byId("assistant-status");
    this.input = byId("assistant-text");
    this.sendButton = byId("assistant-send");
    this.conversationId = null;
    this.pending = null; // {text, key, conversationId} of a send that did not get an answer
    this.proposals = [];
    this.receipts = new Map();
    byId("assistant-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    byId("assistant-new").addEventListener("click", () => this.newConversation());
    this.load();
  }

  async load() {
    const conversations = await api("GET", this.urls.conversations);
    if (conversations.ok) {
      const mine = conversations.data.find((c) => c.workspaceId === config.workspaceId);
      if (mine) this.conversationId = mine.id;
    }
    await this.refresh();
    byId("assistant").dataset.ready = "1";
  }

  conversationUrl(suffix) {
    return `${this.urls.assistant}${this.conversationId}/${suffix}`;
  }

  // Sequential on purpose: a few small reads, and the embedded test server shares one
  // database connection between its request threads.
  async refresh() {
    await this.loadProposals();
    if (!this.conversationId) {
      this.renderTranscript([]);
      return;
    }
    const messages = await api("GET", this.conversationUrl("messages"));
    const receipts = await api("GET", this.conversationUrl("memory-receipts"));
    this.receipts = new Map((receipts.ok ? receipts.data : []).map((r) => [r.turnId, r]));
    this.renderTranscript(messages.ok ? messages.data : []);
  }

  async newConversation() {
    const created = await api("POST", this.urls.conversations, {
      body: { workspaceId: config.workspaceId },
    });
    if (!created.ok) {
      announce(this.status, failure("No new conversation", created), "error");
      return;
    }
    this.conversationId = created.data.id;
    this.pending = null;
    await this.refresh();
    announce(this.status, "Started a new conversation.");
  }

  async send() {
    const text = this.input.value;
    if (!text.trim()) {
      announce(this.status, "Write a message first.");
      return;
    }
    this.sendButton.disabled = true;
    try {
      await this.sendText(text);
    } finally {
      this.sendButton.disabled = false;
    }
  }

  async sendText(text) {
    if (!this.conversationId) {
      const created = await api("POST", this.urls.conversations, {
        body: { workspaceId: config.workspaceId },
      });
      if (!created.ok) {
        announce(this.status, failure("Not sent", created, " Your message is kept."), "error");
        return;
      }
      this.conversationId = created.data.id;
    }
    let isSaving = false;
    if (this.frame.inFlight) {
      announce(this.status, "Waiting for your save to finish before sending…", "info", {
        focus: false,
      });
      isSaving = !(await this.frame.waitForWrite(SEND_WAIT_FOR_SAVE_MS));
    }
    // A resend of the same text after a failure reuses its key, so the server admits it once.
    const isResend =
      this.pending &&
      this.pending.text === text &&
      this.pending.conversationId === this.conversationId;
    const key = isResend ? this.pending.key : newIdempotencyKey();
    this.pending = { text, key, conversationId: this.conversationId };
    const headers = {
      "Idempotency-Key": key,
      "X-Memory-State": this.frame.memoryState(isSaving),
    };
    if (config.keySessionId) headers["X-Key-Session"] = config.keySessionId;
    announce(this.status, "Sending…", "info", { focus: false });
    const result = await api("POST", this.conversationUrl("messages"), {
      body: { text },
      headers,
    });
    if (!result.ok) {
      announce(this.status, failure("Not sent", result, " Your message is kept."), "error");
      return;
    }
    this.pending = null;
    this.input.value = "";
    const turnId = result.data.turn.id;
    await this.refresh();
    for (let i = 0; i < TURN_POLL_LIMIT && !this.isTurnDone(turnId); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, TURN_POLL_MS));
      await this.refresh();
    }
    await this.followCapture(turnId);
    announce(this.status, this.turnSummary(turnId), "success");
  }

  isTurnDone(turnId) {
    const receipt = this.receipts.get(turnId);
    return Boolean(receipt && ["completed", "failed"].includes(receipt.turnState));
  }

  // The assistant committed a new revision: show it in the frame if there is no draft.
  async followCapture(turnId) {
    const receipt = this.receipts.get(turnId);
    if (!receipt || receipt.captureStatus !== "committed") return;
    const frame = this.frame;
    if (receipt.capturedVersion <= frame.baseVersion || frame.isDirty || frame.inFlight) return;
    const current = await frame.readCurrent();
    if (current.ok && !frame.isDirty) {
      frame.adopt(current.data.version, current.data.content);
      announce(
        frame.status,
        `The assistant saved version ${current.data.version}; it is shown here.`,
        "info",
        { focus: false },
      );
    }
  }

  turnSummary(turnId) {
    const receipt = this.receipts.get(turnId);
    if (!receipt) return "Sent.";
    if (receipt.turnState === "failed") return "The assistant could not answer this time.";
    if (receipt.turnState !== "completed") return "Sent; the assistant is still working.";
    const parts = ["The assistant answered."];
    if (receipt.captureStatus === "committed") {
      parts.push(`Remembered as memory version ${receipt.capturedVersion}.`);
    }
    if (this.proposals.some((p) => p.admissionId === receipt.admissionId)) {
      parts.push("It suggested a change to memory; see Suggested changes.");
    }
    return parts.join(" ");
  }

  renderTranscript(entries) {
    const list = byId("transcript");
    const turns = new Map();
    for (const entry of entries) {
      if (!turns.has(entry.turnId)) turns.set(entry.turnId, []);
      turns.get(entry.turnId).push(entry);
    }
    list.replaceChildren(
      ...Array.from(turns, ([turnId, turnEntries]) => this.renderTurn(turnId, turnEntries)),
    );
    byId("transcript-empty").hidden = turns.size > 0;
  }

  renderTurn(turnId, entries) {
    const item = element("li", { className: "turn", attrs: { "data-turn-id": turnId } });
    for (const entry of entries) {
      if (entry.role === "user") {
        item.append(this.renderMessage("You", entry.content, "from-you"));
      }
    }
    const answers = entries.filter(
      (entry) => entry.role === "assistant" && !(entry.toolCalls || []).length,
    );
    const tools = entries
      .filter((entry) => entry.role === "assistant")
      .flatMap((entry) => (entry.toolCalls || []).map((call) => call.name));
    const receipt = this.receipts.get(turnId);
    if (answers.length) {
      item.append(
        this.renderMessage("Assistant", answers[answers.length - 1].content, "from-assistant"),
      );
    } else if (receipt && receipt.turnState === "failed") {
      item.append(element("p", { className: "hint", text: "The assistant could not answer." }));
    } else {
      item.append(element("p", { className: "hint", text: "The assistant is working…" }));
    }
    if (tools.length) {
      item.append(element("p", { className: "hint", text: `Used: ${tools.join(", ")}.` }));
    }
    if (receipt) item.append(this.renderReceipt(receipt));
    return item;
  }

  renderMessage(who, content, className) {
    return element("div", { className: `message-bubble ${className}` }, [
      element("span", { className: "who", text: who }),
      element("p", { className: "message-text", text: content }),
    ]);
  }

  revisionLink(version) {
    return element("a", { text: `revision ${version}`, attrs: { href: `${this.urls.changes}${version}/` } });
  }

  renderReceipt(receipt) {
    const line = element("p", { className: "receipt" });
    if (receipt.recallStatus === "provided") {
      line.append("Used memory ", this.revisionLink(receipt.recallVersion), ".");
    } else if (receipt.recallStatus) {
      line.append(WITHHELD_REASONS[receipt.recallStatus] || `Memory: ${receipt.recallStatus}.`);
    } else {
      line.append("Memory: not read.");
    }
    if (receipt.captureStatus === "committed" && receipt.capturedVersion) {
      line.append(
        " ",
        element("strong", { className: "remembered", text: "Remembered" }),
        " as ",
        this.revisionLink(receipt.capturedVersion),
        ".",
      );
    }
    if (this.proposals.some((p) => p.admissionId === receipt.admissionId)) {
      line.append(" ", element("span", { className: "badge", text: "Suggested a change" }));
    }
    return line;
  }

  async loadProposals() {
    const proposals = await api("GET", this.urls.proposals);
    this.proposals = proposals.ok ? proposals.data : [];
    const section = byId("proposals");
    section.hidden = this.proposals.length === 0;
    byId("proposal-list").replaceChildren(...this.proposals.map((p) => this.renderProposal(p)));
  }

  renderProposal(proposal) {
    const description = proposal.changes.map(describeChange).join("; ");
    const reason =
      proposal.reason === "read_only"
        ? "Suggested because memory is read only."
        : "Suggested because memory changed while the assistant was working.";
    const apply = element("button", {
      className: "button-primary",
      text: "Apply",
      attrs: { type: "button", "aria-label": `Apply: ${description}` },
    });
    const dismiss = element("button", {
      text: "Dismiss",
      attrs: { type: "button", "aria-label": `Dismiss: ${description}` },
    });
    apply.addEventListener("click", () => this.apply(proposal, [apply, dismiss]));
    dismiss.addEventListener("click", () => this.dismiss(proposal, [apply, dismiss]));
    return element("li", { className: "proposal", attrs: { "data-proposal-id": proposal.id } }, [
      element(
        "ul",
        { className: "proposal-changes" },
        proposal.changes.map((change) => element("li", { text: describeChange(change) })),
      ),
      element("p", { className: "hint", text: reason }),
      element("div", { className: "actions" }, [apply, dismiss]),
    ]);
  }

  async apply(proposal, buttons) {
    const frame = this.frame;
    if (!(await frame.resolveDraft("applying the suggestion"))) return;
    await frame.waitBeforeWrite();
    buttons.forEach((button) => {
      button.disabled = true;
    });
    frame.setBusy(true);
    const result = await frame.track(
      api("POST", `${this.urls.proposals}/${proposal.id}/apply`, {
        headers: { "X-Base-Version": String(frame.baseVersion) },
      }),
    );
    if (result.ok) await frame.acknowledgeVersion(result.data.version);
    frame.setBusy(false);
    buttons.forEach((button) => {
      button.disabled = false;
    });
    if (result.ok) {
      await this.refresh();
      announce(
        this.status,
        `Applied. Memory is now version ${result.data.version}, saved as your change.`,
        "success",
      );
    } else if (result.code === "VERSION_CONFLICT") {
      await frame.showNewer(result);
      announce(
        this.status,
        failure(
          "Not applied",
          result,
          ` Memory changed to version ${result.detail.currentVersion}; the newer text is ` +
            "shown. Press Apply again to apply the suggestion to it.",
        ),
        "error",
      );
    } else {
      await this.refresh();
      announce(this.status, failure("Not applied", result, " Nothing changed."), "error");
    }
  }

  async dismiss(proposal, buttons) {
    buttons.forEach((button) => {
      button.disabled = true;
    });
    const result = await api("POST", `${this.urls.proposals}/${proposal.id}/dismiss`);
    await this.refresh();
    announce(
      this.status,
      result.ok ? "Dismissed the suggestion." : failure("Not dismissed", result),
      result.ok ? "success" : "error",
    );
  }
}

function describeChange(change) {
  if (change.op === "add") {
    return change.heading
      ? `Add “${change.line}” under “${change.heading}”`
      : `Add “${change.line}”`;
  }
  if (change.op === "replace") return `Replace “${change.target}” with “${change.line}”`;
  if (change.op === "remove") return `Remove “${change.target}”`;
  return change.op;
}

// ---- Notes ---------------------------------------------------------------------------------

function documentUrl(path) {
  return `${config.urls.documents}?path=${encodeURIComponent(path)}`;
}

function noteUrl(path) {
  return `${config.urls.note}?path=${encodeURIComponent(path)}`;
}

function pathFailure(verb, result) {
  if (result.code === "INVALID_DOCUMENT_PATH" && result.detail.canonical) {
    return failure(verb, result, ` Use the spelling “${result.detail.canonical}”.`);
  }
  if (result.code === "MEMORY_NAMESPACE_RESERVED") {
    return failure(verb, result, " Memory is edited only in the Memory frame.");
  }
  return failure(verb, result);
}

class NoteEditor extends DocumentEditor {
  constructor() {
    const note = config.note;
    super({ prefix: "note", content: note.content, version: note.version, noun: "note" });
    this.path = note.path;
    this.isDeleted = note.deleted;
    this.part("delete").addEventListener("click", () => this.remove());
    this.part("restore").addEventListener("click", () => this.restore());
    this.part("move").addEventListener("submit", (event) => {
      event.preventDefault();
      this.move();
    });
  }

  busyParts() {
    return [...super.busyParts(), "delete", "restore"];
  }

  write(content, base) {
    return api("PUT", documentUrl(this.path), {
      body: { content },
      headers: { "X-Base-Version": String(base) },
    });
  }

  readCurrent() {
    return api("GET", documentUrl(this.path));
  }

  showDeleted(isDeleted) {
    this.isDeleted = isDeleted;
    this.textarea.readOnly = isDeleted;
    for (const name of ["save", "discard", "delete", "move"]) this.part(name).hidden = isDeleted;
    this.part("restore").hidden = !isDeleted;
    this.part("deleted-badge").hidden = !isDeleted;
  }

  async remove() {
    if (!(await this.resolveDraft("the delete"))) return;
    await this.waitBeforeWrite();
    this.setBusy(true);
    const result = await this.track(
      api("DELETE", documentUrl(this.path), {
        headers: { "X-Base-Version": String(this.baseVersion) },
      }),
    );
    this.setBusy(false);
    if (result.ok) {
      this.showDeleted(true);
      announce(this.status, "Deleted. Its revisions are kept; Restore brings it back.", "success");
    } else if (result.code === "VERSION_CONFLICT" && result.detail.deleted) {
      this.showDeleted(true);
      announce(this.status, failure("Not deleted", result, " It was already deleted."), "error");
    } else if (result.code === "VERSION_CONFLICT") {
      await this.showNewer(result);
      announce(
        this.status,
        failure("Not deleted", result, " It changed first; check the newer text, then retry."),
        "error",
      );
    } else {
      announce(this.status, failure("Not deleted", result), "error");
    }
  }

  async restore() {
    this.setBusy(true);
    const result = await this.track(
      api("POST", config.urls.documentsRestore, {
        body: { path: this.path },
        headers: { "X-Base-Version": String(this.baseVersion) },
      }),
    );
    this.setBusy(false);
    if (!result.ok) {
      announce(this.status, failure("Not restored", result), "error");
      return;
    }
    const current = await this.readCurrent();
    if (current.ok) this.adopt(current.data.version, current.data.content);
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
    announce(this.status, pathFailure("Not moved", result), "error");
  }
}

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

// ---- start ---------------------------------------------------------------------------------

function start() {
  if (byId("memory-frame") && config) {
    const frame = new MemoryFrame();
    if (byId("assistant")) new AssistantPanel(frame);
  }
  if (byId("note-editor") && config) new NoteEditor();
  if (byId("note-create") && config) setUpNotesList();
  document.querySelector("[data-focus-on-load]")?.focus();
  // htmx swapped a revision into Changes: move focus to it and mark the open one.
  document.addEventListener("htmx:afterSwap", (event) => {
    const target = event.detail.target;
    target.querySelector("[data-focus-on-swap]")?.focus();
    const shown = target.querySelector("[data-revision]")?.dataset.revision;
    for (const link of document.querySelectorAll(".revision-list a")) {
      if (link.textContent.trim() === `Version ${shown}`) link.setAttribute("aria-current", "true");
      else link.removeAttribute("aria-current");
    }
  });
  document.documentElement.dataset.frameReady = "1";
}

start();
