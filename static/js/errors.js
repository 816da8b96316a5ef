// One sentence a person can act on for every error code the API answers (docs/errors.md),
// built from the error's `detail` where it says more. Pages never show a bare code: they call
// `explain(result)`; the code stays beside the sentence, for a report to support.
// memory_project/tests/test_error_sentences.py checks that every documented code is here.

const bytes = (count) => `${new Intl.NumberFormat("en").format(count)} bytes`;
const retry = (detail) =>
  detail.retryAfterSeconds ? ` Try again in ${detail.retryAfterSeconds} seconds.` : " Try again shortly.";

const PATH_REASONS = {
  empty: "A path is needed, for example ideas/plan.md.",
  dot_dot_segment: "A path may not contain a “..” folder.",
  control_character: "The path holds an invisible control character; retype it.",
  invisible_character: "The path holds an invisible character; retype it.",
  segment_too_long: "A folder or file name is longer than 255 bytes; shorten it.",
  too_long: "The path is longer than 1,024 bytes; shorten it.",
  not_markdown: "A note's path must end in .md, for example ideas/plan.md.",
  invalid_encoding: "The path holds a broken percent-escape; retype it without % codes.",
  too_deeply_encoded: "The path is still percent-encoded after three decodings; retype it plainly.",
  not_text: "The path must be text.",
  path_conflict: "A document and a folder would share this name; choose another path.",
};

// SPACE_INVALID's `detail.problem`: which rule a space's name (or qualifier) broke.
const SPACE_NAME_PROBLEMS = {
  empty: "it is empty; give it a name.",
  separator: "names have no “/” or “\\”.",
  dot_segment: "a name may not be “.” or “..”.",
  control_character: "it holds an invisible character; retype it.",
  surrounding_whitespace: "it starts or ends with a space; remove it.",
  invalid_text: "it holds characters that cannot be stored; retype it.",
  too_long: "it is longer than 128 bytes (UTF-8); shorten it.",
};

const KEY_SESSION_REASONS = {
  revoked: "The key session was revoked.",
  expired: "The key session ended after idling.",
  unknown: "There is no key session for this workspace in this browser.",
  missing: "There is no key session for this workspace in this browser.",
};

const SENTENCES = {
  NETWORK_ERROR: "The server could not be reached. Check your connection and try again.",
  MALFORMED_REQUEST: "The request was cut or garbled on its way. Reload the page and try again.",
  VALIDATION_FAILED: (detail) => {
    const fields = Object.keys(detail.fields || {});
    return fields.length
      ? `Check ${fields.map((field) => `“${field}”`).join(", ")}: ${Object.values(detail.fields)
          .flat()
          .join(" ")}`
      : "Some of what was sent is missing or out of range; check the form and try again.";
  },
  AUTOLOAD_PATTERN_INVALID: (detail) =>
    `Autoload pattern ${Number(detail.index ?? 0) + 1} is not a relative path pattern (${detail.reason || "invalid"}); fix it and save again.`,
  BOT_SPEC_INVALID: "The bot's memory settings have errors; fix the ones listed and save again.",
  INVALID_HEADER: (detail) =>
    `The page sent a bad ${detail.header || "header"}. Reload the page and try again.`,
  INVALID_TEXT: "The text holds characters that cannot be stored; remove them and try again.",
  HOST_NOT_ALLOWED: "This server does not answer under this address; open it by its usual address.",
  INVALID_DOCUMENT_PATH: (detail) => {
    if (detail.canonical) return `Use the spelling “${detail.canonical}” for this path.`;
    if (detail.reason === "path_conflict" && detail.conflictsWith) {
      return `“${detail.conflictsWith}” is in the way of this path; choose another.`;
    }
    return PATH_REASONS[detail.reason] || "That path is not valid; use folders and a name ending in .md.";
  },
  ARCHIVE_INVALID: (detail) =>
    `This file is not an archive that can be imported (${detail.reason || "invalid"}${
      detail.entry ? `, at ${detail.entry}` : ""
    }). Nothing was imported; export a fresh archive and try again.`,
  SPACE_INVALID: (detail) =>
    `Check the space's ${detail.field || "fields"} (${detail.reason || "invalid"}): ${
      SPACE_NAME_PROBLEMS[detail.problem] || "names have no “/”, “.” or “..”."
    }`,
  AUTHENTICATION_REQUIRED: "You are signed out. Sign in again in another tab (this one keeps what you typed), then retry here.",
  TOKEN_INVALID: "The access token is not valid. Create a new one in Settings.",
  TOKEN_EXPIRED: "The access token or session has expired. Sign in again, or create a new token.",
  TOKEN_REVOKED: "The access token was revoked. Create a new one in Settings.",
  PERMISSION_DENIED: "The page's security check failed. Reload the page and try again.",
  CROSS_ORIGIN_REJECTED: "The request came from another site, so it was refused. Use this site's own page.",
  NO_ACTIVE_TEAM: "You are not in any team yet. Ask a team owner to add you.",
  ORG_PENDING_DELETION: (detail) =>
    `Your organisation is being deleted${
      detail.deletionDueAt ? ` (data is purged ${detail.deletionDueAt})` : ""
    }. Ask an operator to restore it.`,
  WORKSPACE_ADMIN_REQUIRED: "Only an admin of this workspace can do this. Ask one of them.",
  CREDENTIAL_KIND_REFUSED: "This kind of sign-in cannot be used here. Use the web page or a personal access token.",
  TEAM_OWNER_REQUIRED: "Only an owner of the team can do this. Ask one of them.",
  TOKEN_SCOPE_REFUSED: (detail) =>
    `This token is for ${detail.scope || "another use"}; create one with scope ${detail.requiredScope || "api"}.`,
  KEY_SESSION_UNAVAILABLE: (detail) =>
    `${KEY_SESSION_REASONS[detail.reason] || "There is no live key session."} Open a new one in Settings.`,
  WORKSPACE_AI_DISABLED: "Workspace AI is off. An admin can switch it on in Settings.",
  CAPTURE_RETIRED: "The assistant's turn lost its permission to change memory (the mode, workspace AI or key session changed, or a newer message was sent). Send the message again to retry.",
  CREDENTIAL_SUPERSEDED: "A newer message took over this conversation; send again if you still need this.",
  MEMORY_NAMESPACE_RESERVED: "That path is where memory lives; edit memory in the Memory frame, and choose another path for a note.",
  GLOBAL_SPACE_WRITE_DENIED: "Only a site administrator can change the global space.",
  NOT_FOUND: "It no longer exists here, or you are no longer a member. Reload the page.",
  METHOD_NOT_ALLOWED: "This action is not available here. Reload the page.",
  NOT_ACCEPTABLE: "The server answers only JSON here. Reload the page.",
  VERSION_CONFLICT: (detail) =>
    detail.deleted
      ? "It was deleted elsewhere first. Reload to see it."
      : `It was changed elsewhere first${
          detail.currentVersion !== undefined ? ` (version ${detail.currentVersion} is saved now)` : ""
        }. Compare, then save again.`,
  POLICY_REVISION_CONFLICT: "The memory mode was changed elsewhere first. Check the current mode and choose again.",
  IDEMPOTENCY_KEY_REUSED: "This message was already sent with other text. Send it as a new message.",
  PROPOSAL_RETIRED: (detail) =>
    detail.status === "cleared"
      ? "Memory was cleared after this suggestion was made, so it no longer applies."
      : "This suggestion was already applied or dismissed.",
  CONSENT_REVISION_CONFLICT: "Workspace AI was switched elsewhere first. Reload Settings and choose again.",
  ORG_STATE_CONFLICT: (detail) =>
    `The organisation is ${detail.status || "in another state"} now; reload and check before retrying.`,
  BOT_SLUG_TAKEN: "The team already has a bot with this id; choose another.",
  NAME_TAKEN: (detail) =>
    `Your team already has a workspace named ${detail.name ? `“${detail.name}”` : "so"}; choose another name.`,
  ALREADY_MEMBER: "That person is already a member of this workspace.",
  LAST_TEAM_OWNER:
    "This is the team's only owner, and a team keeps one. Make someone else an owner first.",
  LAST_WORKSPACE_ADMIN:
    "This is the workspace's only admin, and a workspace keeps one. Make someone else an admin first.",
  NOT_TEAM_MEMBER: (detail) =>
    `${detail.username ? `“${detail.username}”` : "That person"} is not a member of your team; only team members can be added.`,
  DOCUMENT_EXISTS: (detail) =>
    `${detail.path ? `“${detail.path}”` : "That path"} is already taken (perhaps by a deleted note); choose another path.`,
  LENGTH_REQUIRED: "The upload could not be read whole. Try again.",
  REQUEST_TOO_LARGE: (detail) =>
    `That is too large to send${detail.limitBytes ? ` (at most ${bytes(detail.limitBytes)})` : ""}; make it smaller.`,
  URI_TOO_LONG: "The address is too long; shorten the search or path.",
  UNSUPPORTED_MEDIA_TYPE: "The page sent data in a form the server does not take. Reload the page.",
  EXPECTATION_FAILED: "The request asked for something the server does not do. Reload the page.",
  DOCUMENT_TOO_LARGE: (detail) =>
    `The text is ${detail.bytes ? bytes(detail.bytes) : "too large"}; a document may hold at most ${
      detail.limitBytes ? bytes(detail.limitBytes) : "2 MiB"
    }. Shorten it and save again.`,
  TENANT_QUOTA_EXCEEDED: (detail) =>
    `The team's storage is full${
      detail.quotaBytes ? ` (${bytes(detail.usedBytes ?? 0)} of ${bytes(detail.quotaBytes)})` : ""
    }. Delete or shorten documents, or ask for a larger quota.`,
  SPACE_QUOTA_EXCEEDED: (detail) =>
    `This space is full${
      detail.quotaBytes ? ` (${bytes(detail.usedBytes ?? 0)} of ${bytes(detail.quotaBytes)})` : ""
    }. Delete or shorten documents in it.`,
  SECRET_DETECTED: (detail) =>
    `This looks like a password or key${detail.rule ? ` (${detail.rule})` : ""}${
      detail.line ? ` on line ${detail.line}` : ""
    }${detail.path ? ` of ${detail.path}` : ""}. Remove it; secrets do not belong in memory or notes.`,
  ARCHIVE_CHECKSUM_MISMATCH: (detail) =>
    `The archive is damaged${detail.entry ? ` at ${detail.entry}` : ""}. Nothing was imported; export it again.`,
  DOCUMENT_UNREADABLE: "This stored version failed its integrity check, so it is not shown. An earlier version may open in Changes.",
  MEMORY_EDIT_INVALID: (detail) =>
    `The assistant's change ${Number(detail.change ?? 0) + 1} did not apply (${detail.reason || "invalid"}). Ask it again, more precisely.`,
  CAPTURE_FLAGGED: "The assistant's change reads as an instruction to it rather than a note, so it was not saved; it waits in Suggested changes for you to review.",
  MEMORY_OVERSIZED: "Memory is over the size the assistant may be given. Shorten it to have it used and added to.",
  BASE_VERSION_REQUIRED: "The page did not say which version it edited. Reload the page and try again.",
  IDEMPOTENCY_KEY_REQUIRED: "The page did not label the message. Reload the page and send again.",
  RATE_LIMITED: (detail) => `Too many requests just now.${retry(detail)}`,
  HEADERS_TOO_LARGE: "The request carried too much header data. Sign out and in again, then retry.",
  INTERNAL_ERROR: "Something went wrong on the server. Nothing was changed; try again, and report it if it repeats.",
  TRANSFER_ENCODING_UNSUPPORTED: "The upload was sent in a way the server does not take. Try again from the page.",
  KEY_SESSION_STORE_UNAVAILABLE: (detail) =>
    `The key store is unavailable, so the assistant cannot use memory now.${retry(detail)}`,
  STORE_UNAVAILABLE: "The memory store cannot be reached. Nothing was written; try again later.",
  STORE_BUSY: "Another write is still running on this space. Nothing was written; try again.",
  PRECONDITION_FAILED: (detail) =>
    `It was changed elsewhere first${
      detail.currentVersion !== undefined ? ` (version ${detail.currentVersion} is saved now)` : ""
    }. Compare, then save again.`,
  AUTO_MEMORY_SPACE_RESERVED: "Spaces named “auto-memory” are kept by the auto-memory mirror; use another space name.",
  AUTO_MEMORY_VALUE_INVALID: "The auto-memory setting must be on, off or blank.",
  BOT_MEMORY_DISABLED: "This bot has no memory switched on; give it a memory spec first.",
  BOT_MEMORY_TOOL_DENIED: (detail) =>
    `This bot's memory spec does not allow ${detail.tool ? `“${detail.tool}”` : "this tool"}; change the spec to allow it.`,
  BOT_MEMORY_USER_UNAVAILABLE: "The person whose space this bot uses is no longer in the team; change the bot's memory spec.",
  MEMORY_WRITE_STALE: "The document changed since the bot last read it; read it again, then write.",
  MIRROR_NODE_BUSY: "Another process is using this mirror node; try again when it has finished.",
  MIRROR_NOT_HYDRATED: "This mirror node was never filled (or was released); hydrate it first.",
  MIRROR_STATE_UNSAFE: (detail) =>
    `The mirror's state${detail.path ? ` at ${detail.path}` : ""} is not what the mirror made (a link or a stray file); remove it, then retry.`,
  // Not HTTP errors: why a turn failed (turn.failureCode) or a tool call was refused.
  MODEL_UNAVAILABLE: "The model could not be reached or answered nonsense. Send the message again later.",
  TOO_MANY_MODEL_CALLS: "The assistant kept calling tools without answering. Rephrase and send again.",
  TURN_TIMED_OUT: "The assistant did not finish in time. Send the message again.",
  UNKNOWN_TOOL: "The assistant asked for a tool that does not exist. Send the message again.",
  BAD_ARGUMENTS: "The assistant called a tool wrongly. Send the message again.",
};

// The sentence for an error result ({code, detail}); a code without one gets the server's
// message, which is at least in words.
export function sentence({ code, detail = {}, message = "" }) {
  const entry = SENTENCES[code];
  if (typeof entry === "function") return entry(detail || {});
  if (entry) return entry;
  return message || "The request failed. Reload the page and try again.";
}
