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


class ProposalNotOpen(DomainError):
    """A proposal already applied or dismissed, or made before a Clear, cannot be applied."""

    code = "PROPOSAL_RETIRED"
    status = 409
    default_message = "This proposal can no longer be applied."
