from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from automation.errors import CaptureRetired, IdempotencyKeyReused
from automation.models import (
    Admission,
    BotDocumentSeen,
    CommitFence,
    DeliveryCredential,
    Message,
    Turn,
)
from automation.tests.test_purge_receipt import RECEIPT_CONSTRAINT_CASES
from conftest import violates
from workspaces.tests.test_violations import caught
from workspaces.violations import violated_constraint, violation_code


@pytest.fixture
def admission(assistant) -> Admission:
    return assistant.send()


def admission_copy(admission: Admission, **change: object) -> Admission:
    """A second admission of the conversation, written past Python validation."""
    fields = {
        "owner": admission.owner,
        "workspace": admission.workspace,
        "conversation": admission.conversation,
        "idempotency_key": "another-key",
        "request_digest": "0" * 64,
        "mode": "auto",
        "policy_revision": 0,
        "clear_generation": 0,
        "ai_consent_revision": 0,
        "credential_digest": "1" * 64,
        "expires_at": timezone.now() + timedelta(minutes=1),
    }
    return Admission.objects.create(**{**fields, **change})


ADMISSION_CASES = [
    ("automation_admission_mode_valid", {"mode": "sometimes"}),
    ("automation_admission_status_valid", {"status": "gone"}),
    ("automation_admission_committed_has_receipt", {"status": "committed"}),
    ("automation_admission_committed_has_receipt", {"committed_at": timezone.now()}),
    ("automation_admission_revisions_non_negative", {"policy_revision": -1}),
    ("automation_admission_revisions_non_negative", {"clear_generation": -1}),
    ("automation_admission_revisions_non_negative", {"ai_consent_revision": -1}),
    (
        "automation_admission_recall_status_valid",
        {"recall_status": "maybe", "recalled_at": timezone.now(), "recall_count": 1},
    ),
    ("automation_admission_recall_receipt_complete", {"recall_status": "provided"}),
    ("automation_admission_recall_receipt_complete", {"recall_count": 2}),
]


@pytest.mark.parametrize(("constraint", "change"), ADMISSION_CASES)
def test_admission_constraints_refuse_bad_rows(admission, constraint, change):
    violates(constraint, lambda: Admission.objects.filter(pk=admission.pk).update(**change))


def test_admission_expires_after_it_was_admitted(admission):
    violates(
        "automation_admission_expires_after_admitted",
        lambda: Admission.objects.filter(pk=admission.pk).update(
            expires_at=admission.admitted_at - timedelta(seconds=1)
        ),
    )


def test_idempotency_key_is_unique_per_conversation(admission):
    violates(
        "automation_admission_idempotency_key_unique",
        lambda: admission_copy(admission, idempotency_key=admission.idempotency_key),
    )


def test_a_reused_idempotency_key_is_read_as_idempotency_key_reused(admission):
    error = caught(lambda: admission_copy(admission, idempotency_key=admission.idempotency_key))

    assert violated_constraint(error) == "automation_admission_idempotency_key_unique"
    assert violation_code(error) == IdempotencyKeyReused.code


def test_a_taken_delivery_credential_is_read_by_its_named_constraint(admission):
    error = caught(lambda: admission_copy(admission, credential_digest=admission.credential_digest))

    assert violated_constraint(error) == "automation_admission_credential_digest_unique"
    assert violation_code(error) == "DIGEST_TAKEN"


def test_a_false_fence_is_read_as_capture_retired(assistant, admission):
    assistant.capture(admission)

    error = caught(lambda: CommitFence.objects.filter(admission=admission).update(ok=0))

    assert violated_constraint(error) == "automation_commitfence_ok"
    assert violation_code(error) == CaptureRetired.code
    assert CommitFence.objects.get(admission=admission).ok == 1


def test_credential_slot_holds_a_sha256(admission):
    violates(
        "automation_deliverycredential_digest_is_sha256",
        lambda: DeliveryCredential.objects.filter(conversation=admission.conversation).update(
            credential_digest="plain"
        ),
    )


def test_message_role_is_a_known_choice(admission):
    violates(
        "automation_message_role_valid",
        lambda: Message.objects.filter(turn__admission=admission).update(role="system"),
    )


def test_turn_state_is_a_known_choice(admission):
    violates(
        "automation_turn_state_valid",
        lambda: Turn.objects.filter(admission=admission).update(state="sleeping"),
    )


def test_fence_row_with_ok_0_is_refused(assistant, admission):
    receipt = assistant.capture(admission)

    violates(
        "automation_commitfence_ok",
        lambda: CommitFence.objects.filter(admission=admission).update(ok=0),
    )
    assert receipt.version == 2


def test_fence_ok_cannot_be_null(assistant, admission):
    assistant.capture(admission)

    with pytest.raises(IntegrityError), transaction.atomic():
        CommitFence.objects.filter(admission=admission).update(ok=None)


def test_every_check_constraint_of_this_app_is_tested_above():
    declared = {
        constraint.name
        for model in apps.get_app_config("automation").get_models()
        for constraint in model._meta.constraints
        if isinstance(constraint, models.CheckConstraint)
    }
    # The receipt's cases with a change are its checks (the one without is its unique).
    receipt_checks = {name for name, change in RECEIPT_CONSTRAINT_CASES if change is not None}
    tested = (
        {name for name, _ in ADMISSION_CASES}
        | receipt_checks
        | {
            "automation_admission_expires_after_admitted",
            "automation_deliverycredential_digest_is_sha256",
            "automation_turn_state_valid",
            "automation_commitfence_ok",
            "automation_message_role_valid",
            "automation_botdocumentseen_revision_positive",
            "automation_botdocumentseen_digest_length",
            "automation_botdocumentseen_run_digest_length",
        }
    )

    assert declared == tested


@pytest.mark.parametrize(
    ("constraint", "change"),
    [
        ("automation_botdocumentseen_unique", {}),
        ("automation_botdocumentseen_revision_positive", {"path": "b.md", "revision": 0}),
        ("automation_botdocumentseen_digest_length", {"path": "c.md", "space_digest": "ab"}),
        ("automation_botdocumentseen_run_digest_length", {"path": "d.md", "run_digest": ""}),
    ],
)
def test_what_a_bot_saw_is_one_positive_revision_per_space_run_and_path(tenant, constraint, change):
    row = {
        "bot": tenant.bot_create("helper"),
        "space_digest": "a" * 64,
        "run_digest": "b" * 64,
        "path": "a.md",
    }
    BotDocumentSeen.objects.create(**row, revision=1)

    violates(constraint, lambda: BotDocumentSeen.objects.create(**{**row, "revision": 1, **change}))
