// "Where did this come from?" beside the Memory frame: each saved line with the revision
// that introduced it (GET .../memory/blame answers ids and versions, never text; the lines'
// text is the saved version's, which the frame already holds), and the stale lines to
// review: Keep records a review without a new version, Remove is an ordinary Save.

import { FramePanel, memoryFrame } from "./memory.js";
import { announce, api, byId, element, failure } from "./shared.js";

const CHANGE_WORDS = { save: "Saved", clear: "Cleared", undo: "Restored by Undo", capture: "Remembered" };
const AUTHOR_WORDS = { human: "a person", automatic: "the assistant", import: "an import" };

// The frame's line numbering, as the server's: split at line feeds, a final one ending the
// last line.
function textLines(text) {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

// "a person (alice)"; for a capture, the person whose turn it was: "the assistant for alice".
function describeAuthor({ authorKind, author }) {
  const kind = AUTHOR_WORDS[authorKind] ?? authorKind;
  if (!author) return kind;
  return authorKind === "automatic" ? `${kind} for ${author}` : `${kind} (${author})`;
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

class BlameView extends FramePanel {
  blame = null; // the last answer of GET .../memory/blame

  constructor(frame) {
    super(frame, "blame");
    this.toggle = byId("blame-toggle");
    this.view = byId("blame-view");
    this.toggle.addEventListener("click", () => this.setOpen(this.view.hidden));
    byId("blame-review").addEventListener("click", () => this.setOpen(true, { focusStale: true }));
    // Every version the frame comes to hold (a Save, an Undo, a capture it adopted) has
    // lines of its own origins.
    byId("memory-frame").addEventListener("memory-changed", () => this.load());
    this.frame.textarea.addEventListener("input", () => this.showDraftNote());
    this.load();
  }

  async setOpen(isOpen, { focusStale = false } = {}) {
    this.view.hidden = !isOpen;
    this.toggle.setAttribute("aria-expanded", String(isOpen));
    this.toggle.textContent = isOpen ? "Hide where lines came from" : "Where did each line come from?";
    if (!isOpen) return;
    await this.load();
    if (focusStale) byId("blame-lines").querySelector(".blame-stale button")?.focus();
  }

  async load() {
    const result = await api("GET", this.urls.blame);
    if (!result.ok) {
      announce(this.status, failure("Origins not shown", result), "error", { focus: false });
      return;
    }
    this.blame = result.data;
    this.render();
  }

  showDraftNote() {
    byId("blame-draft-note").hidden = !this.frame.isDirty;
  }

  render() {
    const blame = this.blame;
    const stale = blame.staleLines;
    byId("blame-stale-notice").hidden = stale === 0;
    byId("blame-stale-text").textContent =
      `${stale} ${stale === 1 ? "line has" : "lines have"} not been changed or checked for ` +
      `${blame.staleDays} days. Are they still true?`;
    this.showDraftNote();
    const list = byId("blame-lines");
    // The origins are those of the version the server answered for: pair them with that
    // version's text only, never with another version's or the draft.
    if (blame.version !== this.frame.baseVersion) {
      list.replaceChildren(
        element("li", { className: "hint", text: "Memory changed; press the button again to see its lines." }),
      );
      return;
    }
    const lines = textLines(this.frame.baseText);
    list.replaceChildren(...blame.lines.map((origin) => this.renderLine(origin, lines[origin.line - 1] ?? "")));
    if (!blame.lines.length) {
      list.append(element("li", { className: "hint", text: "Memory has no saved lines." }));
    }
  }

  renderLine(origin, text) {
    const item = element("li", {
      className: origin.stale ? "blame-line blame-stale" : "blame-line",
      attrs: { "data-line": String(origin.line), "data-version": String(origin.version) },
    });
    const number = element("span", { className: "blame-number", text: String(origin.line), attrs: { "aria-hidden": "true" } });
    const body = element("div", { className: "blame-body" });
    body.append(element("span", { className: "blame-text", text: text || " " }));
    const source = element("span", { className: "blame-origin" }, [
      element("span", { className: "visually-hidden", text: `Line ${origin.line}: ` }),
      `${CHANGE_WORDS[origin.changeKind] ?? origin.changeKind} by ${describeAuthor(origin)}, ` +
        `${dateFormat.format(new Date(origin.createdAt))}, in `,
      element("a", {
        text: `version ${origin.version}`,
        attrs: { href: this.revisionUrl(origin.version) },
      }),
    ]);
    if (origin.conversationId) {
      const turn = element("button", {
        className: "button-link",
        text: "open the assistant's turn",
        attrs: { type: "button" },
      });
      turn.addEventListener("click", () => this.openTurn(origin));
      source.append(" · ", turn);
    }
    if (origin.reviewedAt) {
      source.append(` · checked ${dateFormat.format(new Date(origin.reviewedAt))}`);
    }
    body.append(source);
    if (origin.stale) body.append(this.renderReview(origin, text));
    item.append(number, body);
    return item;
  }

  renderReview(origin, text) {
    const keep = element("button", {
      text: "Keep",
      attrs: { type: "button", "aria-label": `Keep line ${origin.line}: still true` },
    });
    const remove = element("button", {
      className: "button-danger",
      text: "Remove",
      attrs: { type: "button", "aria-label": `Remove line ${origin.line}` },
    });
    keep.addEventListener("click", () => this.keep(origin, [keep, remove]));
    remove.addEventListener("click", () => this.remove(origin, text));
    return element("div", { className: "blame-review" }, [
      element("strong", { className: "badge badge-warning", text: "Still true?" }),
      keep,
      remove,
    ]);
  }

  async keep(origin, buttons) {
    buttons.forEach((button) => {
      button.disabled = true;
    });
    const result = await api("POST", this.urls.reviews, {
      body: { line: origin.line },
      headers: { "X-Base-Version": String(this.blame.version) },
    });
    await this.load();
    announce(
      this.status,
      result.ok
        ? `Kept line ${origin.line}: marked as checked today. Memory stays at version ${result.data.version}.`
        : failure("Not kept", result, " Nothing changed."),
      result.ok ? "success" : "error",
    );
  }

  // Remove is a Save of the saved text without the line, through the frame's own Save (its
  // compare-and-set, its conflict handling), after any draft is resolved.
  async remove(origin, text) {
    const frame = this.frame;
    if (!(await frame.resolveDraft("removing the line"))) return;
    if (frame.baseVersion !== this.blame.version) {
      await this.load();
      announce(this.status, "Memory changed meanwhile; check the line again.", "error");
      return;
    }
    const lines = textLines(frame.baseText);
    lines.splice(origin.line - 1, 1);
    const ending = frame.baseText.endsWith("\n") && lines.length ? "\n" : "";
    frame.textarea.value = lines.join("\n") + ending;
    frame.render();
    const result = await frame.save();
    if (result && result.ok) {
      announce(this.status, `Removed line ${origin.line} (“${text}”): saved as version ${result.data.version}.`, "success");
    }
  }

  // The Assistant panel opens the turn when it shows that conversation (the sender's own);
  // anyone else is shown the revision in Changes.
  openTurn(origin) {
    const event = new CustomEvent("assistant:open-turn", {
      cancelable: true,
      detail: { conversationId: origin.conversationId, admissionId: origin.admissionId },
    });
    if (document.dispatchEvent(event)) {
      window.location.assign(this.revisionUrl(origin.version));
    }
  }
}

if (memoryFrame && byId("blame")) new BlameView(memoryFrame);
