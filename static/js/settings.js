// Settings: the workspace's members (add, remove, leave) and your access tokens (create, shown
// once; list; revoke), each through the JSON API that scripts use too.

import { announce, api, byId, config, failure, listAll, submitOnce } from "./shared.js";

// "2026-12-01T03:31:26.123Z" as "2026-12-01 03:31 UTC", as the key sessions table shows times.
function when(iso) {
  return iso ? `${iso.slice(0, 16).replace("T", " ")} UTC` : "never";
}

// A cell of a `.record-table`; `label` names it where a narrow screen stacks the row.
function cell(row, content, label = "") {
  const td = document.createElement("td");
  if (label) td.dataset.label = label;
  if (content instanceof Node) td.append(content);
  else td.textContent = content;
  row.append(td);
  return td;
}

function button(label, accessibleName, onClick, className = "button-danger") {
  const element = document.createElement("button");
  element.type = "button";
  element.className = className;
  element.textContent = label;
  element.setAttribute("aria-label", accessibleName);
  element.addEventListener("click", onClick);
  return element;
}

// Fill the table body `rowsId` with one row per item of the list at `url` (every page), built
// by `rowOf(item, row)`, and show `emptyId`'s note when there is none; a failure is announced
// in `status` instead.
async function fillTable(url, status, failed, rowsId, rowOf, emptyId = null) {
  const result = await listAll(url);
  if (!result.ok) {
    announce(status, failure(failed, result), "error");
    return;
  }
  const rows = result.data.map((item) => {
    const row = document.createElement("tr");
    rowOf(item, row);
    return row;
  });
  byId(rowsId).replaceChildren(...rows);
  if (emptyId) byId(emptyId).hidden = rows.length > 0;
}

// ---- members ---------------------------------------------------------------------------------

const membersStatus = byId("members-status");

function loadMembers() {
  const failed = "Members could not be loaded";
  return fillTable(config.urls.members, membersStatus, failed, "members-rows", (member, row) => {
    const isMe = member.userId === config.userId;
    const name = isMe ? `${member.username} (you)` : member.username;
    cell(row, name, "Member").className = "cell-name";
    cell(row, member.role === "admin" ? "Admin" : "Member", "Role");
    cell(row, when(member.joinedAt), "Joined");
    const action = cell(row, "");
    if (isMe) {
      action.append(button("Leave", "Leave this workspace", () => removeMember(member, true)));
    } else if (config.isAdmin) {
      const [label, role] = member.role === "admin" ? ["Make member", "member"] : ["Make admin", "admin"];
      action.append(
        button(label, `${label}: ${member.username}`, () => setRole(member, role), "button-quiet"),
        button("Remove", `Remove ${member.username}`, () => removeMember(member, false)),
      );
    }
  });
}

async function setRole(member, role) {
  const result = await api("PATCH", `${config.urls.members}/${member.userId}`, { body: { role } });
  if (!result.ok) {
    // The refusal may say the row is stale (removed, or the role changed, elsewhere).
    await loadMembers();
    announce(membersStatus, failure("Role not changed", result), "error");
    return;
  }
  await loadMembers();
  const as = role === "admin" ? "an admin" : "a member";
  announce(membersStatus, `${member.username} is now ${as}.`, "success");
}

async function removeMember(member, isLeaving) {
  const question = isLeaving
    ? "Leave this workspace? You will no longer see it, its memory or its conversations."
    : `Remove ${member.username} from this workspace?`;
  if (!window.confirm(question)) return;
  const result = await api("DELETE", `${config.urls.members}/${member.userId}`);
  if (!result.ok) {
    await loadMembers();
    announce(membersStatus, failure(isLeaving ? "Not left" : "Not removed", result), "error");
    return;
  }
  if (isLeaving) {
    window.location.assign(config.urls.workspaces);
    return;
  }
  await loadMembers();
  announce(membersStatus, `Removed ${member.username}.`, "success");
}

function setUpMemberAdd() {
  const form = byId("member-add");
  if (!form) return;
  submitOnce(form, async () => {
    const username = form.elements.username.value.trim();
    const role = form.elements.role.value;
    const result = await api("POST", config.urls.members, { body: { username, role } });
    if (!result.ok) {
      announce(membersStatus, failure("Not added", result), "error");
      return;
    }
    form.reset();
    form.querySelector(`#member-add-people option[value="${CSS.escape(username)}"]`)?.remove();
    await loadMembers();
    const as = role === "admin" ? "an admin" : "a member";
    announce(membersStatus, `Added ${username} as ${as}.`, "success");
  });
}

// ---- tokens ----------------------------------------------------------------------------------

const tokensStatus = byId("tokens-status");
const SCOPES = { api: "API", mcp: "MCP server" };

function loadTokens() {
  const failed = "Tokens could not be loaded";
  return fillTable(config.urls.tokens, tokensStatus, failed, "token-rows", (token, row) => {
    cell(row, token.name, "Name").className = "cell-name";
    cell(row, SCOPES[token.scope] ?? token.scope, "Scope");
    cell(row, when(token.createdAt), "Created");
    cell(row, when(token.lastUsedAt), "Last used");
    const isExpired = new Date(token.expiresAt) <= new Date();
    const state = isExpired ? "expired" : when(token.expiresAt);
    cell(row, token.revokedAt ? `revoked ${when(token.revokedAt)}` : state, "Expires");
    const action = cell(row, "");
    if (!token.revokedAt && !isExpired) {
      action.append(button("Revoke", `Revoke token ${token.name}`, () => revokeToken(token)));
    }
  }, "token-empty");
}

async function revokeToken(token) {
  if (!window.confirm(`Revoke the token “${token.name}”? Anything using it stops working.`)) return;
  const result = await api("DELETE", `${config.urls.tokens}/${token.id}`);
  if (!result.ok) {
    announce(tokensStatus, failure("Not revoked", result), "error");
    return;
  }
  await loadTokens();
  announce(tokensStatus, `Revoked “${token.name}”. It is refused from now on.`, "success");
}

function setUpTokenCreate() {
  const form = byId("token-create");
  const secret = byId("token-secret");
  submitOnce(form, async () => {
    const body = {
      name: form.elements.name.value.trim(),
      scope: form.elements.scope.value,
      expiresInDays: Number(form.elements.expiresInDays.value),
    };
    const result = await api("POST", config.urls.tokens, { body });
    if (!result.ok) {
      announce(tokensStatus, failure("Not created", result), "error");
      return;
    }
    form.elements.name.value = "";
    byId("token-secret-value").textContent = result.data.token;
    secret.hidden = false;
    await loadTokens();
    const created = `Created “${result.data.name}”. Copy it now: it is shown only once.`;
    announce(tokensStatus, created, "success");
  });
  byId("token-secret-copy").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(byId("token-secret-value").textContent);
      announce(tokensStatus, "Copied.", "success");
    } catch {
      announce(tokensStatus, "Could not copy; select the token and copy it by hand.", "error");
    }
  });
  byId("token-secret-done").addEventListener("click", () => {
    // Gone from the page for good: the server never shows it again.
    byId("token-secret-value").textContent = "";
    secret.hidden = true;
  });
}

if (byId("members-rows")) {
  setUpMemberAdd();
  setUpTokenCreate();
  loadMembers();
  loadTokens();
}
