"""Plain-language explanations of an admission's capture and recall, for staff.

Built only from the admission's own columns (codes, predicate names, versions and
statuses), never from memory text, so showing them can never show memory.
"""

from __future__ import annotations

from automation.models import Admission, RecallStatus
from automation.prompts import WITHHELD_REASONS
from memory.models import MemoryPolicy

# One sentence per clause of the commit fence (automation.selectors.FENCE_PREDICATES): what
# had stopped being true when the assistant tried to write.
FENCE_PREDICATE_SENTENCES: dict[str, str] = {
    "owner_matches": (
        "The write was attempted for someone other than the person who sent the message."
    ),
    "workspace_matches": "The write was aimed at a different workspace than the turn's.",
    "admission_unconsumed": "This turn had already written memory once; a turn writes once.",
    "admission_unexpired": "The turn had run past its time limit before it tried to write.",
    "admitted_in_auto": "The message was sent while memory was not in Auto.",
    "policy_still_auto": "Memory was no longer in Auto when the assistant tried to write.",
    "policy_revision_unchanged": (
        "Someone changed the memory mode after the message was sent (even if it was changed back)."
    ),
    "clear_generation_unchanged": "Someone cleared memory after the message was sent.",
    "ai_still_enabled": "A workspace admin switched workspace AI off after the message was sent.",
    "consent_revision_unchanged": (
        "A workspace admin changed the workspace AI setting after the message was sent."
    ),
    "credential_current": (
        "A newer message in the same conversation took over before this turn tried to write."
    ),
    "credential_unexpired": "The conversation's delivery credential had expired.",
    "key_session_matches": (
        "The write presented a different key session from the one the message was sent with."
    ),
    "key_session_unrevoked": (
        "The key session the message was sent with was revoked, or the message was sent "
        "without one."
    ),
    # Not fence clauses, but the other values a CAPTURE_RETIRED refusal can carry.
    "admission_exists": "The turn's admission no longer existed.",
    "unknown": "The fence refused the write, but by the time it was explained every clause held.",
}

# The refusal codes a capture can record (Admission.capture_refusal_code), in plain words.
CAPTURE_REFUSAL_SENTENCES: dict[str, str] = {
    "CAPTURE_RETIRED": "The turn had lost its authority to write memory.",
    "VERSION_CONFLICT": (
        "Memory had changed since the assistant read it; the change was kept as a proposal "
        "for a person to review instead."
    ),
    "MEMORY_OVERSIZED": "Memory is over the recall bound, or the change would have taken it over.",
    "KEY_SESSION_UNAVAILABLE": "There was no live key session to unlock memory with.",
    "DOCUMENT_UNREADABLE": "The saved memory failed its integrity check and could not be read.",
    "DOCUMENT_TOO_LARGE": "The result would have been larger than a document may be.",
    "INVALID_TEXT": "The change contained text that cannot be stored.",
    "SECRET_DETECTED": "Memory would have held what looks like a credential.",
}

# What the `reason` of another refusal code adds, per code.
CAPTURE_REASON_SENTENCES: dict[str, dict[str, str]] = {
    "MEMORY_OVERSIZED": {
        "memory_over_bound": "Memory was already over the recall bound before the change.",
        "result_over_bound": "The change would have taken memory over the recall bound.",
    },
    "KEY_SESSION_UNAVAILABLE": {
        "missing": "The turn had no key session.",
        "unknown": "The key session was not one of this person's on this workspace.",
        "revoked": "The key session had been revoked.",
        "expired": "The key session had idled out and its key was gone.",
    },
}

# What each recall status of a memory receipt meant for the model call. The withheld
# statuses reuse the reasons the model itself is told, so staff read the same account the
# model was given.
RECALL_SENTENCES: dict[str, str] = {
    RecallStatus.PROVIDED: "The model was given memory version {version}.",
    RecallStatus.OFF: "Memory was off, so the model was given no memory.",
    RecallStatus.EMPTY: "Memory was empty, so the model was given no memory.",
    **{
        status: f"The model was given no memory because {reason}."
        for status, reason in WITHHELD_REASONS.items()
    },
}


def capture_explanation(admission: Admission) -> str:
    """Say what became of the turn's capture: committed, refused (and why), or never tried.

    Reads `admission.committed_revision`; select it with the admission to avoid a query.
    """
    refusal = _refusal_sentence(admission)
    if admission.is_committed:
        revision = admission.committed_revision
        committed = (
            f"Committed as version {revision.version}."
            if revision is not None
            else "Committed; the revision has since been removed."
        )
        return f"{committed} An earlier attempt was refused: {refusal}" if refusal else committed
    if refusal:
        return f"Refused: {refusal}"
    if admission.mode != MemoryPolicy.Mode.AUTO:
        return (
            f"No capture was attempted. The message was sent in "
            f"{admission.get_mode_display()}, where the assistant does not write memory."
        )
    return "No capture was attempted: the assistant did not try to write memory in this turn."


def recall_explanation(admission: Admission) -> str:
    """Say what memory the turn's latest model call was given, and if none, why."""
    if not admission.recall_status:
        return "No model call of this turn has read memory yet."
    sentence = RECALL_SENTENCES.get(admission.recall_status)
    if sentence is None:
        return f"Recall status {admission.recall_status!r} has no explanation."
    calls = "1 model call" if admission.recall_count == 1 else f"{admission.recall_count} calls"
    return f"{sentence.format(version=admission.recall_version)} (Latest of {calls}.)"


def _refusal_sentence(admission: Admission) -> str:
    code, reason = admission.capture_refusal_code, admission.capture_refusal_reason
    if not code:
        return ""
    parts = [f"{code}: {CAPTURE_REFUSAL_SENTENCES.get(code, 'The capture was refused.')}"]
    if code == "CAPTURE_RETIRED":
        detail = FENCE_PREDICATE_SENTENCES.get(reason)
    else:
        detail = CAPTURE_REASON_SENTENCES.get(code, {}).get(reason)
    if detail:
        parts.append(detail)
    elif reason:
        parts.append(f"Reason: {reason}.")
    return " ".join(parts)
