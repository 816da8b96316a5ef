from workspaces.errors import DomainError


class PolicyRevisionConflict(DomainError):
    code = "POLICY_REVISION_CONFLICT"
    status = 409
    default_message = "The memory policy changed since the revision you sent; nothing changed."
