from workspaces.errors import DomainError


class PolicyRevisionConflict(DomainError):
    code = "POLICY_REVISION_CONFLICT"
    status = 409
    default_message = "The memory policy changed since the revision you sent; nothing changed."


class MemoryEditInvalid(DomainError):
    """A change is malformed, or its target does not match exactly one line; nothing applies."""

    code = "MEMORY_EDIT_INVALID"
    status = 422
    default_message = "The memory changes cannot be applied; nothing was written."


class ProposalRetired(DomainError):
    """A proposal already applied or dismissed, or made before a Clear, cannot be applied."""

    code = "PROPOSAL_RETIRED"
    status = 409
    default_message = "This proposal can no longer be applied."


class MemoryNamespaceReserved(DomainError):
    """A path under `.zudotext/memory/`, in any spelling, on a route that may not touch it.

    Only the memory routes write the memory document; generic document routes refuse the
    whole namespace before reading or writing anything.
    """

    code = "MEMORY_NAMESPACE_RESERVED"
    status = 403
    default_message = (
        "Paths under .zudotext/memory/ are reserved for the memory document; "
        "nothing was read or written."
    )


class SpaceInvalid(DomainError):
    """The query does not name a valid memory space. `detail.reason` says why (one of
    unknown_visibility, missing_name, bad_name, missing_qualifier, bad_qualifier,
    unexpected_qualifier) and `detail.field` which field."""

    code = "SPACE_INVALID"
    status = 400
    default_message = "The query does not name a valid memory space."


class AutoloadPatternInvalid(DomainError):
    """An autoload glob that is not a relative path pattern. `detail.index` names the first
    bad pattern and `detail.reason` says why (not_text, empty, absolute, backslash,
    dot_dot_segment, control_character, too_long, globstar_in_segment), or `reason`
    too_many_patterns with `detail.limit`."""

    code = "AUTOLOAD_PATTERN_INVALID"
    status = 400
    default_message = "An autoload pattern is not a valid relative path pattern."


class GlobalSpaceWriteDenied(DomainError):
    code = "GLOBAL_SPACE_WRITE_DENIED"
    status = 403
    default_message = "Only a superuser may write, delete or import in the global memory space."


class SpaceQuotaExceeded(DomainError):
    """The write would take the space past its quota; `detail` has usedBytes, deltaBytes
    and quotaBytes. Nothing was written and no counter moved."""

    code = "SPACE_QUOTA_EXCEEDED"
    status = 422
    default_message = "The memory space's quota would be exceeded; nothing was written."


class SecretDetected(DomainError):
    """The text holds what looks like a live credential. `detail` names the path, the rule
    and the line, never the value. Nothing was written."""

    code = "SECRET_DETECTED"
    status = 422
    default_message = "The text contains what looks like a credential; nothing was written."


class StoreUnavailable(DomainError):
    code = "STORE_UNAVAILABLE"
    status = 503
    default_message = "The memory store cannot be reached; nothing was written. Retry later."


class StoreBusy(DomainError):
    """The space stayed locked by another writer past the write's deadline, in either store
    (PostgreSQL's lock_timeout, or the filesystem store's bounded `flock` wait)."""

    code = "STORE_BUSY"
    status = 503
    default_message = "The memory space is busy with another write; nothing was written. Retry."


class ArchiveInvalid(DomainError):
    """An import's archive is not one this product reads safely. `detail.reason` says why
    and `detail.entry` names the entry (absent when the archive as a whole is refused).
    Nothing was written."""

    code = "ARCHIVE_INVALID"
    status = 400
    default_message = "The archive cannot be imported; nothing was written."


class ArchiveChecksumMismatch(DomainError):
    """An entry's bytes do not match the checksum the archive gives it. `detail.entry` names
    it. Nothing was written."""

    code = "ARCHIVE_CHECKSUM_MISMATCH"
    status = 422
    default_message = "An archive entry does not match its checksum; nothing was written."


class BotSpecInvalid(DomainError):
    """A bot's memory spec with an error diagnostic, or a bot id that is not a slug.
    `detail.diagnostics` lists every diagnostic ({code, severity, field, message}),
    warnings included; nothing was saved."""

    code = "BOT_SPEC_INVALID"
    status = 400
    default_message = "The bot's memory spec has errors; nothing was saved."


class BotSlugTaken(DomainError):
    code = "BOT_SLUG_TAKEN"
    status = 409
    default_message = "The team already has a bot with this id; nothing was saved."


class AutoMemorySpaceReserved(DomainError):
    """A write, delete or import into a space named `auto-memory`: that name is the
    auto-memory mirror's, and only the mirror writes it (people may read it)."""

    code = "AUTO_MEMORY_SPACE_RESERVED"
    status = 403
    default_message = (
        "Spaces named auto-memory are written only by the auto-memory mirror; nothing was written."
    )


class AutoMemoryValueInvalid(DomainError):
    """An auto-memory switch value (a flag, the AUTO_MEMORY environment) other than
    on/off/true/false/1/0/blank: diagnostic C131. `detail.level` names where it came from."""

    code = "AUTO_MEMORY_VALUE_INVALID"
    status = 400
    default_message = "Auto-memory is on, off, true, false, 1, 0 or blank (diagnostic C131)."


class MirrorNotHydrated(DomainError):
    """Sync-back of a mirror node that was never hydrated (or was released): there is no
    manifest to diff against, so nothing can be told apart from a deletion."""

    code = "MIRROR_NOT_HYDRATED"
    status = 409
    default_message = "This mirror node was never hydrated; hydrate it first. Nothing was synced."


class MirrorNodeBusy(DomainError):
    """Another process holds the mirror node's lock (a hydrate, sync-back or release)."""

    code = "MIRROR_NODE_BUSY"
    status = 409
    default_message = "Another process is using this mirror node; nothing was done. Retry."


class MirrorStateUnsafe(DomainError):
    """The mirror's state directory, a space's directory or a node's lock is a symlink or
    not a directory: the mirror never follows one. `detail.path` names it."""

    code = "MIRROR_STATE_UNSAFE"
    status = 409
    default_message = "The mirror's state directory is not safe to use; nothing was done."
