from workspaces.errors import DomainError, VersionConflict


class CaptureRetired(DomainError):
    """The turn's authority to write memory no longer holds; `detail.predicate` names why."""

    code = "CAPTURE_RETIRED"
    status = 403
    default_message = "This turn may no longer write memory; nothing was written."


class CaptureConflict(VersionConflict):
    """Memory changed since the assistant read it: the change comes back as a proposal."""

    default_message = (
        "Memory changed since the assistant read it; the change was kept as a proposal "
        "for a person to review, and nothing was written."
    )


class CaptureFlagged(DomainError):
    """A line the change adds reads as an instruction to the assistant (the instruction
    lint): the change comes back as a proposal naming the rules, even in Auto."""

    code = "CAPTURE_FLAGGED"
    status = 422
    default_message = (
        "A line of this change reads as an instruction to the assistant rather than a note "
        "about the workspace; the change was kept as a proposal for a person to review, and "
        "nothing was written."
    )


class CredentialSuperseded(DomainError):
    """A newer message in the conversation took its credential slot: the older turn's
    delivery credential still names its turn, but that turn may no longer act."""

    code = "CREDENTIAL_SUPERSEDED"
    status = 403
    default_message = (
        "A newer message in this conversation took over its delivery credential; this "
        "turn can no longer act. Nothing was read or written."
    )


class MemoryOversized(DomainError):
    code = "MEMORY_OVERSIZED"
    status = 422
    default_message = (
        "Memory is over the recall bound, or this change would take it over; automatic "
        "capture is refused until a person shortens it. Nothing was written."
    )


class WorkspaceAiDisabled(DomainError):
    code = "WORKSPACE_AI_DISABLED"
    status = 403
    default_message = "Workspace AI is switched off by a workspace admin."


class IdempotencyKeyRequired(DomainError):
    code = "IDEMPOTENCY_KEY_REQUIRED"
    status = 428
    default_message = "Idempotency-Key is required so that a resend is recognised."


class IdempotencyKeyReused(DomainError):
    code = "IDEMPOTENCY_KEY_REUSED"
    status = 409
    default_message = "This Idempotency-Key was already used with a different body."


class BotMemoryDisabled(DomainError):
    """The bot has no memory spec, or its spec is not enabled: it has no memory tools."""

    code = "BOT_MEMORY_DISABLED"
    status = 403
    default_message = "This bot's memory is not enabled; nothing was read or written."


class BotMemoryToolDenied(DomainError):
    """The bot's spec turns this memory tool off (`read: false` or `write: false`);
    `detail.tool` names it."""

    code = "BOT_MEMORY_TOOL_DENIED"
    status = 403
    default_message = "This bot's memory spec does not allow this tool; nothing was done."


class BotMemoryUserUnavailable(DomainError):
    """The `user` or `private` space of the spec belongs to someone who is no longer an
    active member of the bot's team, or who did not issue the bot token presented."""

    code = "BOT_MEMORY_USER_UNAVAILABLE"
    status = 403
    default_message = (
        "The person whose memory space this bot's spec names is no longer available to "
        "it; nothing was read or written."
    )


class MemoryWriteStale(DomainError):
    """The document changed (or appeared) since the bot last read or listed it; the bot
    must read it again and write over what it reads. `detail.currentRevision`."""

    code = "MEMORY_WRITE_STALE"
    status = 409
    default_message = (
        "This document changed since you last read it; nothing was written. Call "
        "memory_read on it again and write your change over the text it returns."
    )
