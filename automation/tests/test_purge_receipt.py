"""The org purge's receipt: the data keys go first, and a signed receipt that verifies,
counts what was there, digests the ids deleted, and fails on any altered byte."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.apps import apps
from django.conf import settings as django_settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from automation import purge
from automation.models import PurgeReceipt
from automation.purge import PURGE_PLAN, PurgeOrderBroken, org_purge_due
from automation.receipts import (
    ReceiptInvalid,
    ReceiptKey,
    deleted_ids_digest,
    deployment_public_key,
    receipt_verify,
)
from automation.tests.test_purge import make_due, populate
from conftest import violates
from memory.models import SpaceDocument
from workspaces.models import FileVersion, Org, User, WrappedDataKey
from workspaces.services import org_deletion_request
from workspaces.sql import table

KEY_LABELS = {step.label for step in PURGE_PLAN if step.destroys_keys}
postgres_triggers = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PL/pgSQL triggers check the order at the point of delete; CI runs this on PostgreSQL",
)


def ids_of(org_id: int) -> dict[str, list[object]]:
    """Every row the purge should delete, by model label, read before it runs: the admin's
    history of each row too."""
    ids = {step.label: list(step.rows(org_id).values_list("pk", flat=True)) for step in PURGE_PLAN}
    ids = {**ids, "workspaces.Org": [org_id]}
    history = [
        entry
        for label, pks in ids.items()
        for entry in LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(apps.get_model(label)),
            object_id__in=[str(pk) for pk in pks],
        ).values_list("pk", flat=True)
    ]
    return {**ids, "admin.LogEntry": history}


def purged_receipt(assistant) -> tuple[PurgeReceipt, dict[str, list[object]]]:
    populate(assistant)
    org = assistant.tenant.org
    before = ids_of(org.pk)
    make_due(org)

    assert org_purge_due() == [org.pk]

    return PurgeReceipt.objects.get(org_id=org.pk), before


def other_key_text() -> str:
    seed = Ed25519PrivateKey.generate().private_bytes(
        Encoding.Raw, PrivateFormat.Raw, NoEncryption()
    )
    return base64.b64encode(seed).decode()


def test_the_receipt_counts_the_admin_history_it_deletes(make_assistant, make_tenant):
    # The admin's history of the org's rows went with them, uncounted and out of the digest.
    assistant, bystander = make_assistant(), make_tenant()
    staff = User.objects.create(username="staff", is_staff=True)
    for row in (assistant.tenant.org, assistant.tenant.team, bystander.workspace):
        LogEntry.objects.log_actions(
            user_id=staff.pk, queryset=[row], action_flag=CHANGE, change_message="renamed"
        )

    row, before = purged_receipt(assistant)

    signed = receipt_verify(bytes(row.document), pinned=deployment_public_key())
    assert len(before["admin.LogEntry"]) == 2
    assert signed["deletedRows"]["admin.LogEntry"] == 2
    assert signed["deletedIds"]["count"] == row.deleted_rows == sum(map(len, before.values()))
    assert signed["deletedIds"]["sha256"] == deleted_ids_digest(
        (label, pk) for label, pks in before.items() for pk in pks
    )
    assert LogEntry.objects.count() == 1


@pytest.fixture
def receipt(make_assistant) -> tuple[PurgeReceipt, dict[str, list[object]]]:
    return purged_receipt(make_assistant())


# The receipt


def test_a_purge_receipt_verifies_against_the_deployment_key_and_counts_what_was_there(receipt):
    row, before = receipt

    signed = receipt_verify(bytes(row.document), pinned=deployment_public_key())

    assert signed["org"]["id"] == row.org_id
    assert not Org.objects.filter(pk=row.org_id).exists()
    assert signed["deletedRows"] == {label: len(pks) for label, pks in before.items()}
    assert signed["deletedIds"]["count"] == row.deleted_rows == sum(map(len, before.values()))
    assert signed["keysDestroyedBeforeRevisions"] is True
    assert signed["resumedAfterStall"] is False
    assert signed["signingKey"]["keyId"] == row.signing_key_id == deployment_public_key().key_id
    assert row.started_at <= row.finished_at


def test_the_receipt_names_the_org_by_a_digest_of_its_name_only(make_assistant):
    assistant = make_assistant()
    name = assistant.tenant.org.name

    row, _ = purged_receipt(assistant)

    signed = receipt_verify(bytes(row.document))
    assert signed["org"]["nameSha256"] == hashlib.sha256(name.encode()).hexdigest()
    assert name.encode() not in bytes(row.document)


def test_the_id_digest_matches_a_recomputation_from_the_ids_that_existed(receipt):
    row, before = receipt
    # The documented format, written out again here rather than calling the code under test.
    lines = sorted(f"{label}:{pk}\n".encode() for label, pks in before.items() for pk in pks)
    expected = hashlib.sha256(b"".join(lines)).hexdigest()

    signed = receipt_verify(bytes(row.document))

    assert signed["deletedIds"]["sha256"] == row.deleted_ids_sha256 == expected


def test_one_altered_byte_anywhere_in_the_file_fails(receipt):
    document = bytes(receipt[0].document)
    failures = 0

    for position in range(len(document)):
        altered = bytearray(document)
        altered[position] ^= 0x01
        with pytest.raises(ReceiptInvalid):
            receipt_verify(bytes(altered))
        failures += 1

    assert failures == len(document) > 500


@pytest.mark.parametrize(
    "reshape",
    [
        lambda document: json.dumps(json.loads(document), indent=2).encode(),
        lambda document: document.rstrip(b"\n"),
        lambda document: document + b"\n",
        lambda document: document.replace(b'"type":"w', b'"type":"\\u0077'),
    ],
    ids=["pretty-printed", "no-final-newline", "extra-newline", "letter-escaped"],
)
def test_a_reformatted_receipt_with_the_same_content_fails(receipt, reshape):
    document = bytes(receipt[0].document)
    reshaped = reshape(document)
    assert reshaped != document

    with pytest.raises(ReceiptInvalid, match="canonical"):
        receipt_verify(reshaped)


def test_a_receipt_signed_by_another_key_verifies_alone_but_not_against_the_pinned_key(
    make_assistant, settings
):
    pinned = deployment_public_key()
    settings.PURGE_RECEIPT_SIGNING_KEY = other_key_text()

    row, _ = purged_receipt(make_assistant())

    assert receipt_verify(bytes(row.document))["signingKey"]["keyId"] != pinned.key_id
    with pytest.raises(ReceiptInvalid, match="not by the pinned key"):
        receipt_verify(bytes(row.document), pinned=pinned)


def test_a_receipt_with_its_key_swapped_for_another_fails(receipt):
    document = json.loads(bytes(receipt[0].document))
    other = ReceiptKey.from_text(
        base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes_raw()).decode()
    )
    document["receipt"]["signingKey"] = {
        "algorithm": "Ed25519",
        "keyId": other.key_id,
        "publicKey": other.text,
    }
    forged = json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"

    with pytest.raises(ReceiptInvalid, match="signature does not match"):
        receipt_verify(forged)


def test_a_stalled_purge_taken_over_says_so_in_its_receipt(assistant):
    org = assistant.tenant.org
    make_due(org)
    Org.objects.filter(pk=org.pk).update(
        status="purging", purge_claimed_at=timezone.now() - timedelta(hours=2)
    )

    assert purge.org_purge(org_id=org.pk) is True

    signed = receipt_verify(bytes(PurgeReceipt.objects.get(org_id=org.pk).document))
    assert signed["resumedAfterStall"] is True


# The data keys go first


def test_the_plan_lists_every_data_key_before_anything_else():
    kinds = [step.destroys_keys for step in PURGE_PLAN]

    assert kinds == sorted(kinds, reverse=True)
    assert {"workspaces.WorkspaceKey", "memory.SpaceKey"} == KEY_LABELS
    assert all(issubclass(step.model, WrappedDataKey) for step in PURGE_PLAN[: len(KEY_LABELS)])


def test_a_plan_with_a_key_after_another_step_is_refused():
    reordered = (PURGE_PLAN[len(KEY_LABELS)], *PURGE_PLAN[: len(KEY_LABELS)])

    with pytest.raises(PurgeOrderBroken, match="must come before"):
        purge._keys_first(reordered)


def test_every_delete_of_a_key_table_comes_before_any_other_delete(make_assistant):
    assistant = make_assistant()
    populate(assistant)
    make_due(assistant.tenant.org)
    key_tables = {table(step.model) for step in PURGE_PLAN if step.destroys_keys}
    deleted_tables: list[str] = []

    def record(execute, sql, params, many, context):
        if sql.startswith("DELETE FROM "):
            deleted_tables.append(sql.removeprefix("DELETE FROM ").split(" ", 1)[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        org_purge_due()

    first_other = next(i for i, name in enumerate(deleted_tables) if name not in key_tables)
    assert set(deleted_tables[:first_other]) == key_tables
    assert key_tables.isdisjoint(deleted_tables[first_other:])
    assert table(FileVersion) in deleted_tables[first_other:]


@postgres_triggers
def test_no_revision_or_space_document_is_deleted_while_its_key_exists(make_assistant):
    # Triggers (rolled back with the test's transaction) refuse, at the very point a
    # revision or a space document is deleted, while its workspace's or tenant's key exists.
    assistant = make_assistant()
    populate(assistant)
    org = assistant.tenant.org
    with connection.cursor() as cursor:
        cursor.execute(REFUSE_CIPHERTEXT_WHILE_KEYED)
    for rows in (
        FileVersion.objects.filter(file__workspace__team__org=org),
        SpaceDocument.objects.filter(space__tenant__org=org),
    ):
        with pytest.raises(DatabaseError, match="while its key exists"), transaction.atomic():
            rows.delete()
    make_due(org)

    purged = org_purge_due()

    assert purged == [org.pk]
    assert PurgeReceipt.objects.filter(org_id=org.pk).exists()


def refuse_delete_while_keyed(table_name: str, keyed: str) -> str:
    """SQL for a trigger refusing to delete a row of `table_name` while `keyed` (a query on
    the row being deleted, OLD) finds its key."""
    function = f"test_refuse_{table_name}_while_keyed"
    return f"""
CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS ({keyed}) THEN
    RAISE EXCEPTION '{table_name} row % deleted while its key exists', OLD.id;
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER {function} BEFORE DELETE ON {table_name}
  FOR EACH ROW EXECUTE FUNCTION {function}();
"""


REFUSE_CIPHERTEXT_WHILE_KEYED = refuse_delete_while_keyed(
    "workspaces_fileversion",
    "SELECT 1 FROM workspaces_workspacekey k JOIN workspaces_file f"
    " ON f.workspace_id = k.workspace_id WHERE f.id = OLD.file_id",
) + refuse_delete_while_keyed(
    "memory_spacedocument",
    "SELECT 1 FROM memory_spacekey k JOIN memory_memoryspace s"
    " ON s.tenant_id = k.tenant_id WHERE s.id = OLD.space_id",
)


def test_a_key_left_after_the_key_steps_stops_the_purge_before_any_revision(
    make_assistant, monkeypatch
):
    assistant = make_assistant()
    populate(assistant)
    org = assistant.tenant.org
    revisions = FileVersion.objects.filter(file__workspace__team__org=org).count()
    make_due(org)
    step_purge = purge._purge_step

    def keys_survive(step, org_id, history):
        return [] if step.destroys_keys else step_purge(step, org_id, history)

    monkeypatch.setattr(purge, "_purge_step", keys_survive)

    with pytest.raises(PurgeOrderBroken, match="still there"):
        org_purge_due()

    assert FileVersion.objects.filter(file__workspace__team__org=org).count() == revisions
    assert Org.objects.get(pk=org.pk).status == "purging"
    assert not PurgeReceipt.objects.filter(org_id=org.pk).exists()


# The receipt's row


def test_a_receipt_outlives_its_org_and_names_it_by_id_only():
    field = PurgeReceipt._meta.get_field("org_id")

    assert not field.is_relation


RECEIPT_CONSTRAINT_CASES = [
    ("automation_purgereceipt_org_unique", None),
    (
        "automation_purgereceipt_finished_after_started",
        {"finished_at": timezone.now() - timedelta(days=1)},
    ),
    ("automation_purgereceipt_deleted_rows_positive", {"deleted_rows": 0}),
    ("automation_purgereceipt_name_digest_length", {"org_name_sha256": "ab"}),
    ("automation_purgereceipt_ids_digest_length", {"deleted_ids_sha256": "ab"}),
    ("automation_purgereceipt_key_id_length", {"signing_key_id": "ab"}),
]


@pytest.mark.parametrize(("constraint", "change"), RECEIPT_CONSTRAINT_CASES)
def test_each_receipt_constraint_holds_in_the_database(receipt, constraint, change):
    row = receipt[0]

    if change is None:
        violates(
            constraint,
            lambda: PurgeReceipt.objects.create(
                **{
                    field.name: getattr(row, field.name)
                    for field in PurgeReceipt._meta.concrete_fields
                    if not field.primary_key
                }
            ),
        )
    else:
        violates(constraint, lambda: PurgeReceipt.objects.filter(pk=row.pk).update(**change))


# manage.py purge_receipt


def purge_receipt(*args: str) -> tuple[int, str, str]:
    """Run `manage.py purge_receipt ARGS` in this process; return exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("purge_receipt", *args, stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue() + str(error)
    return 0, out.getvalue(), err.getvalue()


def test_verify_prints_the_counts_of_a_valid_receipt(receipt, tmp_path):
    row, before = receipt
    path = tmp_path / "receipt.json"
    path.write_bytes(bytes(row.document))

    code, out, _ = purge_receipt("verify", str(path), "--public-key", deployment_public_key().text)

    assert code == 0
    assert out.startswith(f"VALID: purge receipt of org {row.org_id}")
    for label, pks in before.items():
        assert f"{len(pks):>10}  {label}\n" in out
    assert f"deleted ids SHA-256 {row.deleted_ids_sha256}" in out


def test_verify_exits_1_for_an_altered_receipt_or_another_key(receipt, tmp_path):
    document = bytes(receipt[0].document)
    altered = tmp_path / "altered.json"
    altered.write_bytes(document.replace(b'"deletedRows":{', b'"deletedRows":{ ', 1))
    intact = tmp_path / "intact.json"
    intact.write_bytes(document)
    other = base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes_raw())

    altered_code, altered_out, altered_err = purge_receipt("verify", str(altered))
    other_code, _, other_err = purge_receipt("verify", str(intact), "--public-key", other.decode())

    assert (altered_code, altered_out) == (1, "")
    assert "INVALID: the file is not in its canonical form" in altered_err
    assert other_code == 1
    assert "not by the pinned key" in other_err


@pytest.mark.parametrize(
    "args",
    [["verify", "/nonexistent/receipt.json"], ["verify", "FILE", "--public-key", "not-a-key"]],
    ids=["missing-file", "bad-public-key"],
)
def test_verify_exits_2_for_usage_errors(receipt, tmp_path, args):
    path = tmp_path / "receipt.json"
    path.write_bytes(bytes(receipt[0].document))

    code, out, _ = purge_receipt(*[str(path) if arg == "FILE" else arg for arg in args])

    assert (code, out) == (2, "")


def test_public_key_prints_the_key_the_receipts_carry(receipt):
    code, out, err = purge_receipt("public-key")

    assert code == 0
    key = ReceiptKey.from_text(out)
    signed = receipt_verify(bytes(receipt[0].document), pinned=key)
    assert signed["signingKey"]["publicKey"] == out.strip()
    assert key.key_id in err


def run_manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "purge_receipt", *args],
        cwd=django_settings.BASE_DIR,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memory_project.settings",
            "PURGE_RECEIPT_SIGNING_KEY": django_settings.PURGE_RECEIPT_SIGNING_KEY,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_exit_codes_from_a_shell(receipt, tmp_path):
    document = bytes(receipt[0].document)
    valid, altered = tmp_path / "valid.json", tmp_path / "altered.json"
    valid.write_bytes(document)
    altered.write_bytes(document.replace(b'"resumedAfterStall":false', b'"resumedAfterStall":true'))

    public_key = run_manage("public-key")
    results = {
        "valid": run_manage("verify", str(valid), "--public-key", public_key.stdout.strip()),
        "altered": run_manage("verify", str(altered)),
        "no-file": run_manage("verify"),
        "unknown": run_manage("sign", str(valid)),
    }

    assert public_key.returncode == 0
    assert {name: result.returncode for name, result in results.items()} == {
        "valid": 0,
        "altered": 1,
        "no-file": 2,
        "unknown": 2,
    }
    assert "signature does not match" in results["altered"].stderr


# The admin


def download_url(row: PurgeReceipt) -> str:
    return reverse("admin:automation_purgereceipt_download", args=[row.pk])


def test_staff_see_the_counts_and_download_the_receipt_byte_for_byte(admin_client, receipt):
    row, before = receipt
    change_page = admin_client.get(reverse("admin:automation_purgereceipt_change", args=[row.pk]))

    response = admin_client.get(download_url(row))

    assert download_url(row) in change_page.content.decode()
    for label, pks in before.items():
        assert f"{label}: {len(pks)}" in change_page.content.decode()
    assert response.status_code == 200
    assert response.content == bytes(row.document)
    assert response["Content-Disposition"] == (
        f'attachment; filename="purge-receipt-org-{row.org_id}.json"'
    )
    receipt_verify(response.content, pinned=deployment_public_key())


def test_the_download_is_refused_to_anyone_but_staff_who_may_view_receipts(
    client, receipt, django_user_model
):
    row = receipt[0]
    person = django_user_model.objects.create_user("person", password="pw")
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)

    client.force_login(person)
    as_person = client.get(download_url(row))
    client.force_login(staff)
    as_staff_without_permission = client.get(download_url(row))

    assert as_person.status_code == 302
    assert as_person["Location"].startswith(reverse("admin:login"))
    assert as_staff_without_permission.status_code == 403
    assert bytes(row.document) not in as_person.content + as_staff_without_permission.content


def test_a_sweep_run_with_a_later_clock_still_records_real_times(make_assistant):
    assistant = make_assistant()
    org = assistant.tenant.org
    org_deletion_request(org=org, actor=None)
    before = timezone.now()

    assert org_purge_due(now=timezone.now() + timedelta(days=365)) == [org.pk]

    row = PurgeReceipt.objects.get(org_id=org.pk)
    assert before <= row.started_at <= row.finished_at <= timezone.now()
