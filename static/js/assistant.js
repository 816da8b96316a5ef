// The Assistant panel beside the Memory frame: the conversation, its memory receipts and
// the suggested changes.

import { FramePanel, memoryFrame } from "./memory.js";
import { sentence } from "./errors.js";
import { announce, api, byId, config, element, failure, listAll } from "./shared.js";

const SEND_WAIT_FOR_SAVE_MS = 5000;
const TURN_POLL_MS = 1000;
const TURN_POLL_LIMIT = 30;
const SENDING = "Sending…";

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

// Why the assistant suggested a change instead of making it (a proposal's reason).
const PROPOSAL_REASONS = {
  read_only: "Suggested because memory is read only.",
  version_conflict: "Suggested because memory changed while the assistant was working.",
  instruction_flagged:
    "Held for you to review: a line reads as an instruction to the assistant, not a note.",
};

function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

class AssistantPanel extends FramePanel {
  conversationId = null;
  pending = null; // {text, key, conversationId} of a send that did not get an answer
  proposals = [];
  receipts = new Map();

  constructor(frame) {
    super(frame, "assistant");
    this.input = byId("assistant-text");
    this.sendButton = byId("assistant-send");
    byId("assistant-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    // Ctrl+Enter (Cmd+Enter on a Mac) sends; Enter alone stays a new line.
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.send();
      }
    });
    byId("assistant-new").addEventListener("click", () => this.newConversation());
    this.picker = byId("assistant-conversation");
    this.picker.addEventListener("change", () => this.switchTo(this.picker.value));
    // "Where did this come from?" asks for the turn behind a remembered line; the panel
    // shows it when the conversation is one of this person's.
    document.addEventListener("assistant:open-turn", (event) => {
      const { conversationId, admissionId } = event.detail;
      if (!(this.conversations || []).some((c) => c.id === conversationId)) return;
      event.preventDefault();
      this.openTurn(conversationId, admissionId);
    });
    this.load();
  }

  async load() {
    await this.loadConversations();
    const newest = this.conversations[0];
    if (newest) this.conversationId = newest.id;
    this.renderPicker();
    await this.refresh();
    this.showNewest();
    byId("assistant").dataset.ready = "1";
  }

  // This workspace's conversations of mine, newest first (a list or a page of one).
  async loadConversations() {
    const listed = await listAll(`${this.urls.conversations}?workspaceId=${config.workspaceId}`);
    this.conversations = listed.ok ? listed.data : [];
  }

  renderPicker() {
    const format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    const options = this.conversations.map((conversation, index) =>
      element("option", {
        text: `${index === 0 ? "Latest: " : ""}started ${format.format(new Date(conversation.createdAt))}`,
        attrs: { value: conversation.id },
      }),
    );
    if (!options.length) options.push(element("option", { text: "New conversation", attrs: { value: "" } }));
    this.picker.replaceChildren(...options);
    this.picker.value = this.conversationId ?? "";
  }

  async switchTo(conversationId) {
    if (!conversationId || conversationId === this.conversationId) return;
    this.conversationId = conversationId;
    this.pending = null;
    await this.refresh();
    this.showNewest();
    announce(this.status, "Showing an earlier conversation.", "info", { focus: false });
  }

  async openTurn(conversationId, admissionId) {
    if (conversationId !== this.conversationId) {
      this.conversationId = conversationId;
      this.pending = null;
      this.picker.value = conversationId;
      await this.refresh();
    }
    const transcript = byId("transcript");
    const receipt = [...this.receipts.values()].find((r) => r.admissionId === admissionId);
    const turn = receipt && transcript.querySelector(`[data-turn-id="${receipt.turnId}"]`);
    if (!turn) {
      announce(this.status, "That turn is no longer in the conversation.");
      return;
    }
    transcript.querySelectorAll(".turn-highlighted").forEach((node) => {
      node.classList.remove("turn-highlighted");
    });
    turn.classList.add("turn-highlighted");
    turn.tabIndex = -1;
    turn.scrollIntoView({ block: "center", behavior: "instant" });
    turn.focus();
    announce(this.status, "Showing the turn that remembered this line.", "info", { focus: false });
  }

  // Keep the newest message in view: the transcript scrolls within itself, and the page
  // scrolls to it if it is below the fold.
  showNewest() {
    const last = byId("transcript").lastElementChild;
    if (last) last.scrollIntoView({ block: "end", behavior: "instant" });
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
    const messages = await listAll(this.conversationUrl("messages"));
    const receipts = await listAll(this.conversationUrl("memory-receipts"));
    this.receipts = new Map((receipts.ok ? receipts.data : []).map((r) => [r.turnId, r]));
    this.renderTranscript(messages.ok ? messages.data : []);
  }

  async newConversation() {
    // Off until the answer: a second press (a double-click) would start another, empty one.
    const button = byId("assistant-new");
    button.disabled = true;
    const created = await api("POST", this.urls.conversations, {
      body: { workspaceId: config.workspaceId },
    });
    button.disabled = false;
    if (!created.ok) {
      announce(this.status, failure("No new conversation", created), "error");
      return;
    }
    this.conversationId = created.data.id;
    this.pending = null;
    await this.loadConversations();
    this.renderPicker();
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
      await this.loadConversations();
      this.renderPicker();
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
    announce(this.status, SENDING, "info", { focus: false });
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
    this.showNewest();
    for (let i = 0; i < TURN_POLL_LIMIT && !this.isTurnDone(turnId); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, TURN_POLL_MS));
      await this.refresh();
      this.showNewest();
    }
    await this.followCapture(turnId);
    this.showNewest();
    // An Apply or Dismiss pressed while the turn was answered has said something newer.
    if (this.status.textContent !== SENDING) return;
    const summary = this.turnSummary(turnId);
    announce(this.status, summary.text, summary.kind, { focus: false });
  }

  // Why memory was not changed although the turn tried: the capture's refusal, if the turn
  // made no committed change (a version conflict is not one: it became a suggestion).
  captureRefusal(receipt) {
    const code = receipt.captureRefusalCode;
    if (!code || receipt.captureStatus === "committed" || code === "VERSION_CONFLICT") {
      return null;
    }
    return { code, text: sentence({ code }) };
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

  // What became of the turn, and how to show it: no green "answered" when memory was not
  // changed as asked.
  turnSummary(turnId) {
    const receipt = this.receipts.get(turnId);
    if (!receipt) return { text: "Sent.", kind: "info" };
    if (receipt.turnState === "failed") {
      return { text: "The assistant could not answer this time. Send again.", kind: "error" };
    }
    if (receipt.turnState !== "completed") {
      return { text: "Sent; the assistant is still working.", kind: "info" };
    }
    const parts = ["The assistant answered."];
    if (receipt.captureStatus === "committed") {
      parts.push(`Remembered as memory version ${receipt.capturedVersion}.`);
    }
    if (this.proposals.some((p) => p.admissionId === receipt.admissionId)) {
      parts.push("It suggested a change to memory; see Suggested changes.");
    }
    const refusal = this.captureRefusal(receipt);
    if (refusal) {
      parts.push(`Memory was not changed: ${refusal.text} (${refusal.code})`);
      return { text: parts.join(" "), kind: "warning" };
    }
    return { text: parts.join(" "), kind: "success" };
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
    return element("a", { text: `revision ${version}`, attrs: { href: this.revisionUrl(version) } });
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
    const refusal = this.captureRefusal(receipt);
    if (refusal) {
      line.append(
        " ",
        element("strong", { className: "not-remembered", text: "Not remembered:" }),
        ` ${refusal.text}`,
      );
    }
    return line;
  }

  async loadProposals() {
    const proposals = await listAll(this.urls.proposals);
    this.proposals = proposals.ok ? proposals.data : [];
    const section = byId("proposals");
    section.hidden = this.proposals.length === 0;
    byId("proposal-list").replaceChildren(...this.proposals.map((p) => this.renderProposal(p)));
  }

  renderProposal(proposal) {
    const description = proposal.changes.map(describeChange).join("; ");
    const reason = PROPOSAL_REASONS[proposal.reason];
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
      ...(proposal.flags.length
        ? [
            element(
              "ul",
              { className: "proposal-flags warning" },
              proposal.flags.map((flag) =>
                element("li", { text: `${flag.message} (${flag.rule})` }),
              ),
            ),
          ]
        : []),
      element("div", { className: "actions" }, [apply, dismiss]),
    ]);
  }

  async apply(proposal, buttons) {
    const frame = this.frame;
    // Off from the press, not from the request: Apply first waits for a Save in flight, and
    // a second press in that wait would send the suggestion twice.
    buttons.forEach((button) => {
      button.disabled = true;
    });
    if (!(await frame.resolveDraft("applying the suggestion"))) {
      buttons.forEach((button) => {
        button.disabled = false;
      });
      return;
    }
    await frame.waitBeforeWrite();
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
    // After a conflict the suggestion is still open, as listed; any other answer may change the list.
    if (result.code !== "VERSION_CONFLICT") await this.refresh();
    await frame.reportChange(this.status, "Not applied", result, {
      done: (version) => `Applied. Memory is now version ${version}, saved as your change.`,
      stale: "; the newer text is shown. Press Apply again to apply the suggestion to it.",
    });
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

if (memoryFrame && byId("assistant")) new AssistantPanel(memoryFrame);
