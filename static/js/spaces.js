// Team memory: pick one of the team's memory spaces, see its usage, and list, read, edit,
// create and delete its documents; download the space as an archive, or load an archive
// into it (previewed as a dry run first). (The words before the module's first statement
// must not read as an ES import or export: the static files' hashing rewrites those.) Every write is one compare-and-set request on the
// document's revision (X-Base-Version), with the Memory frame's conflict view: a refused
// Save keeps the draft and shows the saved text beside it.

import { DocumentEditor, announce, api, byId, config, downloadLink, failure } from "./shared.js";

const QUALIFIERS = ["project", "bot", "run"];
const visibilitySelect = byId("space-visibility");
const pickStatus = byId("space-pick-status");
const listStatus = byId("space-list-status");

let space = null; // the open space, as the routes' query

function requiredQualifiers(visibility) {
  return config.visibilities.find((each) => each.value === visibility)?.qualifiers ?? [];
}

// Show exactly the qualifiers the chosen visibility takes; the routes refuse any other.
function showQualifiers() {
  const required = requiredQualifiers(visibilitySelect.value);
  for (const qualifier of QUALIFIERS) {
    const isNeeded = required.includes(qualifier);
    byId(`space-${qualifier}-field`).hidden = !isNeeded;
    byId(`space-${qualifier}`).required = isNeeded;
  }
}

function pickedSpace() {
  const visibility = visibilitySelect.value;
  const query = new URLSearchParams({ visibility, name: byId("space-name").value });
  for (const qualifier of requiredQualifiers(visibility)) {
    query.set(qualifier, byId(`space-${qualifier}`).value);
  }
  return query;
}

function spaceUrl(route, extra = {}) {
  const query = new URLSearchParams(space);
  for (const [key, value] of Object.entries(extra)) query.set(key, value);
  return `${config.urls[route]}?${query}`;
}

// "project space “notes” (project my.app)": the visibility, the name, then the qualifiers.
function spaceLabel() {
  const qualifiers = requiredQualifiers(space.get("visibility"))
    .map((qualifier) => `${qualifier} ${space.get(qualifier)}`)
    .join(", ");
  const label = `${space.get("visibility")} space “${space.get("name")}”`;
  return qualifiers ? `${label} (${qualifiers})` : label;
}

const formatBytes = (bytes) => new Intl.NumberFormat("en").format(bytes);

function showUsage(id, used, quota) {
  const bar = byId(id);
  bar.max = quota || 1;
  bar.value = quota ? Math.min(used, quota) : 0;
  byId(`${id}-text`).textContent = quota
    ? `${formatBytes(used)} of ${formatBytes(quota)} bytes used`
    : `${formatBytes(used)} bytes used; no cap`;
}

// A document's text and revision, read raw: the route answers Markdown, not JSON.
async function readDocument(path) {
  const result = await api("GET", spaceUrl("doc", { path }));
  if (!result.ok) return result;
  const version = Number(result.headers.get("X-Revision"));
  return { ok: true, status: result.status, data: { version, content: result.data } };
}

class SpaceEditor extends DocumentEditor {
  constructor() {
    super({ prefix: "space", content: "", version: 0, noun: "document" });
    this.path = null;
    this.part("delete").addEventListener("click", () => this.remove());
  }

  busyParts() {
    return [...super.busyParts(), "delete"];
  }

  async write(content, base) {
    const result = await api("PUT", spaceUrl("doc", { path: this.path }), {
      markdown: content,
      headers: { "X-Base-Version": String(base) },
    });
    // The shared editor calls what a write acknowledged its version: here, the revision.
    if (result.ok) result.data = { ...result.data, version: result.data.revision };
    return result;
  }

  hasDocument() {
    return this.path !== null;
  }

  readCurrent() {
    return readDocument(this.path);
  }

  // A document deleted elsewhere: its text reads as NOT_FOUND, and a save's VERSION_CONFLICT
  // says only `currentVersion` 0, which read as "version 0 was saved". Keep mine saves on
  // revision 0, creating it again.
  isDeletedConflict() {
    return this.conflict?.content === null && this.conflict.version === 0;
  }

  async showConflict(result) {
    await super.showConflict(result);
    if (!this.isDeletedConflict()) return;
    this.part("conflict-theirs").textContent = "(Deleted.)";
    this.part("conflict-summary").textContent =
      `It was deleted elsewhere after revision ${this.baseVersion}, which your draft is based ` +
      "on. Nothing of yours was written.";
  }

  async save(options) {
    const result = await super.save(options);
    if (result?.code === "VERSION_CONFLICT" && this.isDeletedConflict()) {
      announce(
        this.status,
        "Not saved: It was deleted elsewhere first. Your draft is kept: Keep mine creates it " +
          `again. (${result.code})`,
        "error",
      );
    }
    return result;
  }

  afterAcknowledged() {
    spaceLoad();
  }

  open(path, version, content) {
    this.path = path;
    this.part("path").textContent = path;
    this.adopt(version, content);
    byId("space-editor").hidden = false;
  }

  close() {
    this.path = null;
    this.adopt(0, "");
    byId("space-editor").hidden = true;
  }

  async remove() {
    if (this.baseVersion === 0) {
      announce(this.status, "Nothing to delete: this document has not been saved yet.");
      return;
    }
    const result = await this.deleteAt(spaceUrl("doc", { path: this.path }));
    if (result === null) return;
    if (!result.ok) {
      await this.deleteRefused(result);
      return;
    }
    const path = this.path;
    this.close();
    await spaceLoad();
    announce(listStatus, `Deleted ${path}.`, "success");
  }
}

const editor = new SpaceEditor();

// Leave the open document only once its draft is saved, discarded, or the user stays.
async function leaveDocument(purpose) {
  if (editor.path === null) return true;
  return editor.resolveDraft(purpose);
}

// Who last wrote a document: the member's name for `user:<id>`, and for `import:<id>` (an
// import they ran); a bot, the mirror or a former member as the server stores it.
function writer(updatedBy) {
  const [kind, id] = updatedBy.split(":");
  if (!["user", "import"].includes(kind) || !Object.hasOwn(config.people, id)) {
    return updatedBy;
  }
  return kind === "import" ? `${config.people[id]} (import)` : config.people[id];
}

function documentRow(document) {
  const row = window.document.createElement("tr");
  const open = window.document.createElement("button");
  open.type = "button";
  open.className = "button-quiet";
  open.textContent = document.path;
  open.addEventListener("click", () => documentOpen(document.path));
  // The path, title and tags are the names people chose: their cells may break a long word.
  const cells = [
    [open, true],
    [document.title, true],
    [document.tags.join(", "), true],
    [String(document.revision), false],
    [writer(document.updatedBy), false],
  ];
  for (const [content, isName] of cells) {
    const cell = window.document.createElement("td");
    if (isName) cell.className = "cell-name";
    cell.append(content);
    row.append(cell);
  }
  return row;
}

async function spaceLoad() {
  const asked = space;
  const [usage, listing] = await Promise.all([
    api("GET", spaceUrl("usage")),
    api("GET", spaceUrl("docs")),
  ]);
  // Another space was opened while this one loaded (a slow answer arriving last): showing it
  // now would list one space's documents under the other's name.
  if (asked !== space) return false;
  const refused = [usage, listing].find((result) => !result.ok);
  if (refused) {
    byId("space-view").hidden = true;
    announce(pickStatus, failure("Space not opened", refused), "error");
    return false;
  }
  byId("space-label").textContent = spaceLabel();
  showUsage("space-usage-space", usage.data.usedBytes, usage.data.quotaBytes);
  showUsage("space-usage-tenant", usage.data.tenantUsedBytes, usage.data.tenantQuotaBytes);
  const documents = listing.data.documents;
  byId("space-documents").replaceChildren(...documents.map(documentRow));
  byId("space-empty").hidden = documents.length > 0;
  byId("space-export").href = spaceUrl("export");
  byId("space-view").hidden = false;
  return true;
}

const importStatus = byId("space-import-status");
const importRun = byId("space-import-run");
const ACTIONS = {
  create: "new",
  overwrite: "overwrites ours",
  skip: "skipped: we keep ours",
  rename: "renamed",
};

function importCounts(report) {
  const ignored = report.ignored.length ? `; ignored: ${report.ignored.join(", ")}` : "";
  return (
    `${report.imported} imported, ${report.replaced} replaced, ${report.skipped} skipped, ` +
    `${report.renamed} renamed${ignored}`
  );
}

function importReset() {
  importRun.disabled = true;
  byId("space-import-plan").hidden = true;
}

// One request for both steps: the preview is the same request with dryRun=1.
async function importSend(isDryRun) {
  const file = byId("space-import-file").files[0];
  if (!file) return null;
  const query = { strategy: byId("space-import-strategy").value, dryRun: isDryRun ? "1" : "0" };
  const result = await api("POST", spaceUrl("import", query), { archive: file });
  if (!result.ok) {
    importReset();
    const verb = isDryRun ? "Import preview refused" : "Import refused";
    announce(importStatus, failure(verb, result), "error");
    return null;
  }
  return result.data;
}

async function importPreview() {
  const plan = await importSend(true);
  if (plan === null) return;
  byId("space-import-summary").textContent = `Preview: ${importCounts(plan)}. Nothing is written yet.`;
  byId("space-import-documents").replaceChildren(
    ...plan.documents.map((planned) => {
      const item = window.document.createElement("li");
      const target = planned.action === "rename" ? ` → ${planned.target}` : "";
      item.textContent = `${planned.path}${target} (${ACTIONS[planned.action]})`;
      return item;
    }),
  );
  byId("space-import-plan").hidden = false;
  importRun.disabled = false;
  announce(importStatus, "Preview ready: check it, then Import.", "info", { focus: false });
}

async function importRunNow() {
  // Pressed again before the answer, it would import the archive a second time (with
  // rename, a second copy of each document). A refusal leaves it off too: preview again.
  importRun.disabled = true;
  const report = await importSend(false);
  if (report === null) return;
  importReset();
  await spaceLoad();
  announce(importStatus, `Imported: ${importCounts(report)}.`, "success");
}

async function spaceOpen() {
  if (!(await leaveDocument("opening another space"))) return;
  space = pickedSpace();
  documentRequests += 1; // a document still on its way belongs to the space left
  editor.close();
  importReset();
  if (await spaceLoad()) announce(pickStatus, `Opened ${spaceLabel()}.`, "info", { focus: false });
}

// Counts the documents asked for: an answer to any but the last is dropped (a slow network
// answering out of order), or it would replace the document opened since, and a draft begun
// there, without asking.
let documentRequests = 0;

async function documentOpen(path) {
  if (!(await leaveDocument("opening another document"))) return;
  const request = ++documentRequests;
  const result = await readDocument(path);
  if (request !== documentRequests) return;
  if (!result.ok) {
    announce(listStatus, failure(`Could not open ${path}`, result), "error");
    return;
  }
  editor.open(path, result.data.version, result.data.content);
  editor.textarea.focus();
}

async function documentNew(path) {
  if (!(await leaveDocument("creating a document"))) return;
  // A path that holds a document already (perhaps written since the list was loaded) opens
  // it: an empty draft there could only meet a conflict on Save.
  const request = ++documentRequests;
  const existing = await readDocument(path);
  if (request !== documentRequests) return;
  if (!existing.ok && existing.code !== "NOT_FOUND") {
    announce(listStatus, failure(`Could not create ${path}`, existing), "error");
    return;
  }
  const { version, content } = existing.ok ? existing.data : { version: 0, content: "" };
  editor.open(path, version, content);
  // The path now heads the editor; left in the form it would invite a second Create.
  byId("space-create").reset();
  editor.textarea.focus();
  const said = existing.ok
    ? `${path} already exists: opened it, at revision ${existing.data.version}.`
    : `New document ${path}: write its text, then Save to create it.`;
  announce(editor.status, said, "info", { focus: false });
}

visibilitySelect.addEventListener("change", showQualifiers);
byId("space-pick").addEventListener("submit", (event) => {
  event.preventDefault();
  spaceOpen();
});
byId("space-create").addEventListener("submit", (event) => {
  event.preventDefault();
  documentNew(byId("space-create-path").value);
});
byId("space-import").addEventListener("submit", (event) => {
  event.preventDefault();
  importPreview();
});
byId("space-import").addEventListener("change", importReset);
importRun.addEventListener("click", importRunNow);
byId("space-export").addEventListener("click", (event) => {
  downloadLink(event, byId("space-export-status"), `Downloaded ${spaceLabel()}.`);
});
showQualifiers();
spaceOpen();
