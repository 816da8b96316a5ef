// Bots: list the team's bots, create one, change its name, runtime, auto-memory and memory
// spec with the spec's diagnostics shown live as it is typed (the validate route, which
// saves nothing), and issue (shown once) or revoke its tokens. Owners get the controls;
// the routes refuse anyone else whatever the page shows.

import { announce, api, byId, config, failure, listAll, submitOnce } from "./shared.js";

const listStatus = byId("bot-list-status");
const editStatus = byId("bot-status");
const tokenStatus = byId("bot-token-status");
const specField = byId("bot-spec");
const DIAGNOSE_DELAY_MS = 300;

let openBot = null; // the id of the bot in the editor
let diagnoseTimer = null;
let diagnoseSeq = 0; // only the answer to the latest request is shown

const botUrl = (id, suffix = "") => `${config.urls.bots}/${encodeURIComponent(id)}${suffix}`;
const when = (iso) => (iso ? `${iso.slice(0, 16).replace("T", " ")} UTC` : "—");

function cell(row, text) {
  const td = row.insertCell();
  td.textContent = text;
  return td;
}

function button(label, onClick, className = "") {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  if (className) element.className = className;
  element.addEventListener("click", onClick);
  return element;
}

// One row per item of a listing (`fill` writes its cells); the empty note when there is none.
function fillTable(bodyId, emptyId, items, fill) {
  const rows = byId(bodyId);
  rows.replaceChildren();
  for (const item of items) fill(rows.insertRow(), item);
  byId(emptyId).hidden = items.length > 0;
}

// A spec as the textarea shows it: JSON, which is YAML too; empty for none.
const specText = (memory) => (memory == null ? "" : JSON.stringify(memory, null, 2));

async function loadBots() {
  const result = await listAll(config.urls.bots);
  if (!result.ok) return announce(listStatus, failure("Listing bots", result), "error");
  fillTable("bot-rows", "bot-empty", result.data, (row, bot) => {
    cell(row, bot.id).className = "cell-name";
    cell(row, bot.name).className = "cell-name";
    cell(row, bot.runtime);
    cell(row, bot.autoMemory || "unset");
    cell(row, bot.memory == null ? "none" : bot.memory.visibility ?? bot.memory.scope ?? "set");
    const label = config.isOwner ? "Edit" : "View";
    const open = button(label, () => openEditor(bot.id), "button-quiet");
    open.setAttribute("aria-label", `${label} ${bot.id}`);
    cell(row, "").append(open);
  });
}

async function openEditor(id) {
  const result = await api("GET", botUrl(id));
  if (!result.ok) return announce(listStatus, failure(`Opening ${id}`, result), "error");
  const bot = result.data;
  openBot = bot.id;
  byId("bot-editor-id").textContent = bot.id;
  byId("bot-name").value = bot.name;
  byId("bot-runtime").value = bot.runtime;
  byId("bot-auto-memory").value = bot.autoMemory;
  specField.value = specText(bot.memory);
  for (const field of byId("bot-edit").elements) field.disabled = !config.isOwner;
  specField.readOnly = !config.isOwner;
  specField.disabled = false; // members read the spec, and may select and copy it
  byId("bot-token-issued")?.setAttribute("hidden", "");
  byId("bot-editor").hidden = false;
  announce(editStatus, "", "info", { focus: false });
  // Focus now, with the fields: after the loads below it would pull the caret away from
  // whatever the user has started typing into meanwhile.
  byId("bot-name").focus();
  await Promise.all([diagnose(), loadTokens()]);
}

function showDiagnostics(diagnostics, note = "") {
  const list = byId("bot-diagnostics");
  list.replaceChildren();
  if (note) {
    const item = document.createElement("li");
    item.textContent = note;
    item.className = "status-error";
    list.append(item);
    return;
  }
  if (diagnostics.length === 0) {
    const item = document.createElement("li");
    item.textContent = "None: the spec is clean.";
    list.append(item);
  }
  for (const each of diagnostics) {
    const item = document.createElement("li");
    item.textContent = `${each.code} ${each.severity} (${each.field}): ${each.message}`;
    item.dataset.severity = each.severity;
    if (each.severity === "error") item.className = "status-error";
    list.append(item);
  }
}

function editedBot() {
  return {
    name: byId("bot-name").value,
    runtime: byId("bot-runtime").value,
    autoMemory: byId("bot-auto-memory").value,
    memory: specField.value,
  };
}

// Why the server could not read the spec (malformed YAML or JSON), or the refusal itself.
const specRefusal = (result) => result.detail?.fields?.memory?.[0] ?? failure("Checking", result);

async function diagnose() {
  const seq = ++diagnoseSeq;
  const { runtime, memory, autoMemory } = editedBot();
  // The bot's id, so the `user` its stored spec names is judged as saving it would (C051).
  const result = await api("POST", config.urls.validate, {
    body: { runtime, memory, autoMemory, ...(openBot ? { bot: openBot } : {}) },
  });
  if (seq !== diagnoseSeq) return;
  if (result.ok) showDiagnostics(result.data.diagnostics);
  else showDiagnostics([], specRefusal(result));
}

function diagnoseSoon() {
  clearTimeout(diagnoseTimer);
  diagnoseTimer = setTimeout(diagnose, DIAGNOSE_DELAY_MS);
}

async function save(event) {
  event.preventDefault();
  const result = await api("PATCH", botUrl(openBot), { body: editedBot() });
  if (result.ok) {
    specField.value = specText(result.data.memory);
    announce(editStatus, `Saved ${result.data.id}.`, "success");
    await Promise.all([loadBots(), diagnose()]);
    return;
  }
  if (result.code === "BOT_SPEC_INVALID") showDiagnostics(result.detail.diagnostics ?? []);
  else if (result.detail?.fields?.memory) showDiagnostics([], specRefusal(result));
  announce(editStatus, failure("Not saved", result, " Nothing was changed."), "error");
}

async function create(event) {
  const body = {
    id: byId("bot-create-id").value,
    name: byId("bot-create-name").value,
    runtime: byId("bot-create-runtime").value,
  };
  const result = await api("POST", config.urls.bots, { body });
  if (!result.ok) return announce(listStatus, failure("Not created", result), "error");
  event.target.reset();
  announce(listStatus, `Created ${result.data.id}.`, "success", { focus: false });
  await loadBots();
  await openEditor(result.data.id);
}

async function loadTokens() {
  const result = await listAll(botUrl(openBot, "/tokens"));
  if (!result.ok) return announce(tokenStatus, failure("Listing tokens", result), "error");
  fillTable("bot-token-rows", "bot-token-empty", result.data, (row, token) => {
    cell(row, token.name).className = "cell-name";
    cell(row, when(token.createdAt));
    cell(row, token.lastUsedAt ? when(token.lastUsedAt) : "never");
    cell(row, when(token.expiresAt));
    cell(row, token.revokedAt ? when(token.revokedAt) : "no");
    const actions = cell(row, "");
    if (config.isOwner && !token.revokedAt) {
      const revoke = button("Revoke", () => revokeToken(token), "button-danger");
      revoke.setAttribute("aria-label", `Revoke ${token.name}`);
      actions.append(revoke);
    }
  });
}

async function issueToken(event) {
  const name = byId("bot-token-name").value;
  const result = await api("POST", botUrl(openBot, "/tokens"), { body: { name } });
  if (!result.ok) return announce(tokenStatus, failure("Not issued", result), "error");
  event.target.reset();
  byId("bot-token-secret").textContent = result.data.token;
  byId("bot-token-issued").hidden = false;
  announce(tokenStatus, `Issued ${name}. Copy it now.`, "success");
  await loadTokens();
}

async function revokeToken(token) {
  const result = await api("DELETE", botUrl(openBot, `/tokens/${token.id}`));
  if (!result.ok) return announce(tokenStatus, failure("Not revoked", result), "error");
  announce(tokenStatus, `Revoked ${token.name}.`, "success");
  await loadTokens();
}

for (const id of ["bot-spec", "bot-runtime", "bot-auto-memory"]) {
  byId(id).addEventListener("input", diagnoseSoon);
}
byId("bot-edit").addEventListener("submit", save);
if (byId("bot-create")) submitOnce(byId("bot-create"), create);
if (byId("bot-token-issue")) submitOnce(byId("bot-token-issue"), issueToken);
loadBots();
