"""The assistant's side: conversations, delivery credentials, admissions and commit fences."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory.models import MemoryPolicy
from workspaces.constraints import (
    after_check,
    choices_check,
    length_check,
    minimum_check,
    unique,
)
from workspaces.models import Bot, FileVersion, KeySession, User, Workspace


class RecallStatus(models.TextChoices):
    """What memory a model call was given, and if none, why (the seed's withheld reasons)."""

    PROVIDED = "provided", "Provided"
    OFF = "off", "Memory is off"
    EMPTY = "empty", "Memory is empty"
    PENDING = "pending", "A save was still in flight"
    CONFLICT = "conflict", "The sender's view conflicts with the saved memory"
    STALE = "stale", "The sender had not seen the latest saved memory"
    OVERSIZED = "oversized", "Memory is over the recall bound"
    DELETED = "deleted", "Memory was deleted"
    UNAVAILABLE = "unavailable", "No live key session"
    NO_ACCESS = "no_access", "The sender no longer has workspace access"
    SUPERSEDED = "superseded", "A newer turn holds the conversation's credential"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="conversations")
    owner = models.ForeignKey(User, on_delete=models.CASCADE, related_name="conversations")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"conversation {self.id}"


class DeliveryCredential(models.Model):
    """The conversation's one credential slot: each admitted turn overwrites it.

    Holds only the SHA-256 of the credential, never the credential. A turn whose
    admission no longer matches the slot was superseded by a newer turn.
    """

    conversation = models.OneToOneField(
        Conversation, on_delete=models.CASCADE, primary_key=True, related_name="credential"
    )
    credential_digest = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            length_check(
                "credential_digest",
                64,
                "automation_deliverycredential_digest_is_sha256",
                "DIGEST_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"credential slot of {self.conversation_id}"


class AdmissionStatus(models.TextChoices):
    ADMITTED = "admitted", "Admitted"
    COMMITTED = "committed", "Committed"


class Admission(models.Model):
    """The authority one sent turn was admitted under, frozen at the moment of sending.

    Everything an automatic write must still match is copied here when the turn is
    admitted; the commit fence compares these columns with the live rows.
    """

    Status = AdmissionStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(User, on_delete=models.CASCADE, related_name="admissions")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="admissions")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="admissions"
    )
    idempotency_key = models.CharField(max_length=200)
    request_digest = models.CharField(max_length=64)
    mode = models.CharField(max_length=16, choices=MemoryPolicy.Mode.choices)
    policy_revision = models.BigIntegerField()
    clear_generation = models.BigIntegerField()
    ai_consent_revision = models.BigIntegerField()
    key_session = models.ForeignKey(
        KeySession, on_delete=models.SET_NULL, null=True, blank=True, related_name="admissions"
    )
    # What the sender's client said it had acknowledged (X-Memory-State); null when it sent
    # none, as an MCP turn does.
    acknowledged_version = models.BigIntegerField(null=True, blank=True)
    save_in_flight = models.BooleanField(null=True, blank=True)
    has_unresolved_conflict = models.BooleanField(null=True, blank=True)
    credential_digest = models.CharField(max_length=64)
    admitted_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ADMITTED)
    committed_at = models.DateTimeField(null=True, blank=True)
    committed_revision = models.ForeignKey(
        FileVersion, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    capture_digest = models.CharField(max_length=64, blank=True, default="")
    # Why the turn's latest capture attempt was refused, for staff: an error code, and for
    # CAPTURE_RETIRED the first false clause of the fence. Never any text.
    capture_refusal_code = models.CharField(max_length=32, blank=True)
    capture_refusal_reason = models.CharField(max_length=64, blank=True)
    capture_refused_at = models.DateTimeField(null=True, blank=True)
    # The recall half of the turn's memory receipt: what its latest model call was given.
    # Ids, versions and statuses only, never text.
    recall_status = models.CharField(max_length=16, choices=RecallStatus.choices, blank=True)
    recall_version = models.BigIntegerField(null=True, blank=True)
    recalled_at = models.DateTimeField(null=True, blank=True)
    recall_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            unique(
                ["conversation", "idempotency_key"],
                "automation_admission_idempotency_key_unique",
                "IDEMPOTENCY_KEY_REUSED",
            ),
            unique(
                ["credential_digest"],
                "automation_admission_credential_digest_unique",
                "DIGEST_TAKEN",
            ),
            choices_check(
                "mode", MemoryPolicy.Mode, "automation_admission_mode_valid", "MODE_INVALID"
            ),
            choices_check(
                "status", AdmissionStatus, "automation_admission_status_valid", "STATUS_INVALID"
            ),
            models.CheckConstraint(
                condition=(
                    ~Q(status=AdmissionStatus.COMMITTED)
                    & Q(committed_at__isnull=True, capture_digest="")
                )
                | (
                    Q(status=AdmissionStatus.COMMITTED, committed_at__isnull=False)
                    & ~Q(capture_digest="")
                ),
                name="automation_admission_committed_has_receipt",
                violation_error_code="STATUS_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(recall_status__in=["", *RecallStatus.values]),
                name="automation_admission_recall_status_valid",
                violation_error_code="STATUS_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(recall_status="", recalled_at__isnull=True, recall_count=0)
                | (~Q(recall_status="") & Q(recalled_at__isnull=False, recall_count__gte=1)),
                name="automation_admission_recall_receipt_complete",
                violation_error_code="STATUS_INVALID",
            ),
            after_check(
                "expires_at",
                "admitted_at",
                "automation_admission_expires_after_admitted",
                "EXPIRY_INVALID",
            ),
            minimum_check(
                ("policy_revision", "clear_generation", "ai_consent_revision"),
                0,
                "automation_admission_revisions_non_negative",
                "REVISION_INVALID",
            ),
        ]
        indexes = [models.Index(fields=["conversation", "-admitted_at"])]

    def __str__(self) -> str:
        return f"admission {self.id}"

    @property
    def is_committed(self) -> bool:
        return self.status == self.Status.COMMITTED


class CommitFence(models.Model):
    """Written in the same transaction as an automatic revision; exists only if `ok` is 1.

    The CHECK makes a false predicate abort the transaction, taking the revision with it.
    `ok` is computed by `automation.capture._fence_commit`, which says how NULL is kept out.
    """

    admission = models.OneToOneField(
        Admission, on_delete=models.CASCADE, primary_key=True, related_name="fence"
    )
    revision = models.OneToOneField(FileVersion, on_delete=models.CASCADE, related_name="fence")
    presented_key_session = models.ForeignKey(
        KeySession, on_delete=models.CASCADE, related_name="fences"
    )
    ok = models.SmallIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(ok=1),
                name="automation_commitfence_ok",
                violation_error_code="CAPTURE_RETIRED",
            ),
        ]

    def __str__(self) -> str:
        return f"fence of {self.admission_id}"


class TurnState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class Turn(models.Model):
    """One run of the assistant for one admitted message."""

    State = TurnState

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    admission = models.OneToOneField(Admission, on_delete=models.CASCADE, related_name="turn")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Why a failed turn failed (an error code, never text from the conversation).
    failure_code = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            choices_check("state", TurnState, "automation_turn_state_valid", "STATE_INVALID"),
        ]

    def __str__(self) -> str:
        return f"turn {self.id} ({self.state})"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"


class Message(models.Model):
    """One entry of a conversation's transcript, sealed under the workspace key.

    The recall block a model call is given is never stored here: memory reaches the
    model only at the binding, fresh each call, so a cleared memory is not replayed.
    """

    Role = MessageRole

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    sequence = models.PositiveIntegerField()
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            choices_check("role", MessageRole, "automation_message_role_valid", "ROLE_INVALID"),
            unique(
                ["turn", "sequence"], "automation_message_sequence_unique_in_turn", "SEQUENCE_TAKEN"
            ),
        ]
        indexes = [models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return f"{self.role} message {self.id}"


class BotDocumentSeen(models.Model):
    """The revision of a space document that one run of a bot last read, listed or wrote:
    what that run's next `memory_write` of the path is based on, so that a change someone
    made since is refused instead of overwritten. Names only (digests of the space and the
    run, a path), never text.
    """

    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="documents_seen")
    # SHA-256 of the space handle's id: the id can be longer than an index entry allows.
    space_digest = models.CharField(max_length=64)
    # SHA-256 of the run the calls came with (of "" without one): each run of a bot keeps
    # its own view, so one run's write is never based on a revision only another run read.
    run_digest = models.CharField(max_length=64)
    path = models.CharField(max_length=1024)
    revision = models.PositiveBigIntegerField()
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            unique(
                ["bot", "space_digest", "run_digest", "path"],
                "automation_botdocumentseen_unique",
                "SEEN_TAKEN",
            ),
            minimum_check(
                "revision", 1, "automation_botdocumentseen_revision_positive", "VERSION_INVALID"
            ),
            length_check(
                "space_digest", 64, "automation_botdocumentseen_digest_length", "DIGEST_INVALID"
            ),
            length_check(
                "run_digest", 64, "automation_botdocumentseen_run_digest_length", "DIGEST_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.bot_id} saw {self.path}@{self.revision}"


class PurgeReceipt(models.Model):
    """The signed record that the nightly purge deleted one org (automation/receipts.py).

    `document` is the exact file staff download and `manage.py purge_receipt verify`
    checks; the columns beside it repeat what staff search and list by. `org_id` is a plain
    id, not a foreign key: the receipt must outlive the org it describes, so nothing may
    cascade it away. It holds ids, counts and digests, never a name or memory text.
    """

    org_id = models.BigIntegerField()
    org_name_sha256 = models.CharField(max_length=64)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    deleted_rows = models.BigIntegerField()
    deleted_ids_sha256 = models.CharField(max_length=64)
    signing_key_id = models.CharField(max_length=16)
    document = models.BinaryField()

    class Meta:
        constraints = [
            unique(["org_id"], "automation_purgereceipt_org_unique", "RECEIPT_EXISTS"),
            after_check(
                "finished_at",
                "started_at",
                "automation_purgereceipt_finished_after_started",
                "RECEIPT_INVALID",
                strictly=False,
            ),
            minimum_check(
                "deleted_rows",
                1,
                "automation_purgereceipt_deleted_rows_positive",
                "RECEIPT_INVALID",
            ),
            length_check(
                "org_name_sha256",
                64,
                "automation_purgereceipt_name_digest_length",
                "DIGEST_INVALID",
            ),
            length_check(
                "deleted_ids_sha256",
                64,
                "automation_purgereceipt_ids_digest_length",
                "DIGEST_INVALID",
            ),
            length_check(
                "signing_key_id", 16, "automation_purgereceipt_key_id_length", "KEY_ID_INVALID"
            ),
        ]

    def __str__(self) -> str:
        return f"purge receipt of org {self.org_id}"
