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
