"""The admin across the three apps: no page shows memory text or a secret, no list page runs
a query per row, history is view-only, and an admission explains its capture and recall."""

from __future__ import annotations

import base64
import html

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Model
from django.test import RequestFactory
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from automation.errors import CaptureRetired
from automation.explain import (
    CAPTURE_REFUSAL_SENTENCES,
    FENCE_PREDICATE_SENTENCES,
    RECALL_SENTENCES,
    recall_explanation,
)
from automation.models import Admission, CommitFence, DeliveryCredential, RecallStatus, Turn
from automation.purge import org_purge
from automation.selectors import FENCE_PREDICATES, transcript_for_conversation
from automation.services import conversation_create, memory_recall
from automation.tasks import PURGE_TASK
from automation.tests.conftest import Assistant
from automation.tests.test_purge import make_due, populate
from automation.tools import TurnContext, remember_in_memory
from memory.documents import ActorKind, DocumentActor, document_write
from memory.models import Proposal
from memory.provenance import memory_blame
from memory.selectors import memory_current_get
from memory.services import memory_line_keep, memory_policy_set, memory_save
from workspaces.models import ApiToken, AuditEvent, FileVersion, KeySessionRevocation, Org
from workspaces.selectors import workspace_data_key
from workspaces.services import api_token_create, key_session_open, key_session_revoke

PROJECT_APPS = ("workspaces", "memory", "automation")
MARKER = "zebra-quartz-7731"
# Every list page runs at most this many queries, whether each kind has 2 rows or 20.
CHANGELIST_MAX_QUERIES = 8
# History: staff may look, never add, edit or delete.
VIEW_ONLY = [
    "workspaces.fileversion",
    "workspaces.keysessionrevocation",
    "workspaces.auditevent",
    "workspaces.workspacekey",
    "workspaces.keysession",
    "workspaces.file",
    "memory.proposal",
    "memory.memorypolicy",
    "memory.lineprovenance",
    "memory.linereview",
    "automation.admission",
    "automation.commitfence",
    "automation.turn",
    "automation.message",
    "automation.deliverycredential",
    "automation.conversation",
    "automation.purgereceipt",
]


def registered_models() -> list[type[Model]]:
    """Every model of the project's apps that the admin shows, so that a newly registered
    one is covered without editing these tests."""
    return sorted(
        (model for model in admin.site._registry if model._meta.app_label in PROJECT_APPS),
        key=lambda model: model._meta.label,
    )


def admin_url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def world_of(tenant, text: str = MARKER) -> Assistant:
    """A workspace with rows of every kind, `text` in its memory, a note, a proposal and a
    transcript message, and a recall receipt."""
    workspace, member = tenant.workspace, tenant.member
    memory_policy_set(workspace=workspace, mode="auto", expected_revision=0, actor=member)
    memory_save(workspace=workspace, author=member, base_version=0, content=f"- {text} tea\n")
    assistant = Assistant(
        tenant=tenant,
        conversation=conversation_create(workspace=workspace, owner=member),
        key_session=key_session_open(workspace=workspace, user=member),
    )
    populate(assistant)  # leaves the policy in Read only and memory at version 2
    document_write(
        actor=DocumentActor(kind=ActorKind.PERSON, workspace=workspace, user=member),
        raw_path="notes/plans.md",
        content=f"{text} in a note\n",
        base_version=0,
    )
    proposing = assistant.send(f"please remember {text}")
    remember_in_memory(
        TurnContext(proposing, assistant.key_session.pk, 2),
        [{"op": "add", "line": f"- {text} proposal"}],
    )
    memory_recall(admission=proposing)
    memory_blame(workspace=workspace)
    memory_line_keep(workspace=workspace, reviewer=member, base_version=2, line=1)
    purged_org_receipt(f"purged beside {tenant.org.name}")
    return assistant


def purged_org_receipt(name: str) -> None:
    """The receipt of an org that held nothing but itself, purged for real."""
    org = Org.objects.create(name=name)
    make_due(org)
    assert org_purge(org_id=org.pk)


def spellings_of(key: bytes) -> set[str]:
    """The ways a page could print raw bytes: hex, base64, or Python's bytes repr."""
    return {
        key.hex(),
        base64.b64encode(key).decode(),
        base64.urlsafe_b64encode(key).decode(),
        html.escape(repr(key)),
        repr(key),
    }


def every_page(client, user) -> dict[str, str]:
    """Render the admin's index pages, each registered model's list, and the change, history
    and (where allowed) delete pages of one of its rows. Returns each page's HTML by URL."""
    request = RequestFactory().get("/")
    request.user = user
    pages: dict[str, str] = {}
    index_urls = [reverse("admin:index")]
    index_urls += [reverse("admin:app_list", args=[label]) for label in PROJECT_APPS]
    for url in index_urls:
        response = client.get(url)
        assert response.status_code == 200, url
        pages[url] = response.content.decode()
    for model in registered_models():
        row = model._default_manager.order_by("pk").first()
        assert row is not None, f"the world has no {model._meta.label} row to render"
        urls = [
            admin_url(model, "changelist"),
            admin_url(model, "change", row.pk),
            admin_url(model, "history", row.pk),
        ]
        if admin.site._registry[model].has_delete_permission(request, row):
            urls.append(admin_url(model, "delete", row.pk))
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            pages[url] = response.content.decode()
    return pages


def test_no_admin_page_shows_memory_text_a_key_or_a_secret(admin_client, admin_user, tenant):
    assistant = world_of(tenant)
    _, raw_token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    data_key = workspace_data_key(workspace=tenant.workspace)
    assert data_key is not None
    assert MARKER in memory_current_get(workspace=tenant.workspace).content
    transcript = transcript_for_conversation(conversation=assistant.conversation)
    assert any(MARKER in entry.body["content"] for entry in transcript)
    assert Proposal.objects.filter(workspace=tenant.workspace).count() >= 2
    secrets = {
        MARKER,
        raw_token,
        *spellings_of(data_key),
        *ApiToken.objects.values_list("token_hash", flat=True),
        *DeliveryCredential.objects.values_list("credential_digest", flat=True),
        *Admission.objects.values_list("credential_digest", flat=True),
        *Admission.objects.values_list("request_digest", flat=True),
        *Admission.objects.exclude(capture_digest="").values_list("capture_digest", flat=True),
    }

    pages = every_page(admin_client, admin_user)

    assert len(pages) >= 3 * len(VIEW_ONLY)
    leaks = {url: sorted(s for s in secrets if s in page) for url, page in pages.items()}
    assert {url: found for url, found in leaks.items() if found} == {}


def test_every_list_page_runs_the_same_bounded_queries_for_2_rows_or_20(
    admin_client, make_tenant, django_assert_max_num_queries
):
    def list_page_queries() -> dict[str, int]:
        counts = {}
        for model in registered_models():
            with django_assert_max_num_queries(CHANGELIST_MAX_QUERIES) as captured:
                response = admin_client.get(admin_url(model, "changelist"))
            assert response.status_code == 200
            counts[model._meta.label] = len(captured)
        return counts

    for _ in range(2):
        world_of(make_tenant())
    with_two = list_page_queries()
    for _ in range(18):
        world_of(make_tenant())
    assert all(model._default_manager.count() >= 20 for model in registered_models())

    with_twenty = list_page_queries()

    assert with_twenty == with_two


@pytest.mark.parametrize("label", VIEW_ONLY)
def test_history_rows_cannot_be_added_changed_or_deleted(admin_client, tenant, label):
    world_of(tenant)
    model = next(m for m in registered_models() if m._meta.label_lower == label)
    row = model._default_manager.order_by("pk").first()
    assert row is not None
    before = model._default_manager.filter(pk=row.pk).values().get()

    changed = admin_client.post(admin_url(model, "change", row.pk), {"version": 99})
    deleted = admin_client.post(admin_url(model, "delete", row.pk), {"post": "yes"})
    added = admin_client.post(admin_url(model, "add"), {})
    bulk = admin_client.post(
        admin_url(model, "changelist"),
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )

    assert (changed.status_code, deleted.status_code, added.status_code) == (403, 403, 403)
    assert bulk.status_code in (200, 302)
    assert model._default_manager.filter(pk=row.pk).values().get() == before


def test_a_capture_refused_because_memory_went_off_says_so_in_plain_words(admin_client, assistant):
    tenant = assistant.tenant
    admission = assistant.send()
    memory_policy_set(
        workspace=tenant.workspace, mode="off", expected_revision=1, actor=tenant.admin
    )
    with pytest.raises(CaptureRetired):
        assistant.capture(admission)

    page = admin_client.get(admin_url(Admission, "change", admission.pk)).content.decode()

    assert "CAPTURE_RETIRED" in page
    assert FENCE_PREDICATE_SENTENCES["policy_still_auto"] in page
    assert "Memory was no longer in Auto when the assistant tried to write." in page
    assert "None (nothing was committed)" in page


def test_a_committed_capture_links_admission_fence_and_revision_both_ways(admin_client, assistant):
    admission = assistant.send()
    receipt = assistant.capture(admission)
    memory_recall(admission=admission)
    fence = CommitFence.objects.get(admission=admission)
    revision = fence.revision
    admission_url = admin_url(Admission, "change", admission.pk)
    fence_url = admin_url(CommitFence, "change", fence.pk)
    revision_url = admin_url(FileVersion, "change", revision.pk)

    admission_page = admin_client.get(admission_url).content.decode()
    fence_page = admin_client.get(fence_url).content.decode()
    revision_page = admin_client.get(revision_url).content.decode()

    assert f"Committed as version {receipt.version}." in admission_page
    assert f"The model was given memory version {receipt.version}." in admission_page
    assert fence_url in admission_page
    assert revision_url in admission_page
    assert admin_url(Turn, "change", admission.turn.pk) in admission_page
    assert admission_url in fence_page
    assert revision_url in fence_page
    assert fence_url in revision_page


def test_an_admission_never_tried_says_so(admin_client, assistant):
    admission = assistant.send()

    page = admin_client.get(admin_url(Admission, "change", admission.pk)).content.decode()

    assert "No capture was attempted" in page
    assert "No model call of this turn has read memory yet." in page


def test_every_fence_predicate_and_recall_status_has_a_plain_sentence():
    assert set(FENCE_PREDICATES) <= set(FENCE_PREDICATE_SENTENCES)
    assert set(RecallStatus.values) == set(RECALL_SENTENCES)
    assert "CAPTURE_RETIRED" in CAPTURE_REFUSAL_SENTENCES
    for status in RecallStatus.values:
        admission = Admission(recall_status=status, recall_version=3, recall_count=1)
        assert "has no explanation" not in recall_explanation(admission)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (RecallStatus.PROVIDED, "The model was given memory version 3."),
        (RecallStatus.OFF, "Memory was off"),
        (RecallStatus.EMPTY, "Memory was empty"),
        (RecallStatus.SUPERSEDED, "because a newer message in this conversation took over"),
    ],
)
def test_recall_explanation_reads_as_a_sentence(status, expected):
    admission = Admission(recall_status=status, recall_version=3, recall_count=2)

    assert expected in recall_explanation(admission)


def test_admissions_are_found_by_id_conversation_and_workspace(admin_client, assistant):
    admission = assistant.send()
    other = assistant.send()
    url = admin_url(Admission, "changelist")

    by_id = admin_client.get(url, {"q": str(admission.pk)})
    by_conversation = admin_client.get(url, {"q": str(assistant.conversation.pk)})
    by_workspace = admin_client.get(url, {"q": assistant.tenant.workspace.name})
    by_mode = admin_client.get(url, {"mode__exact": "auto", "status__exact": "admitted"})

    assert list(by_id.context["cl"].result_list) == [admission]
    assert set(by_conversation.context["cl"].result_list) == {admission, other}
    assert set(by_workspace.context["cl"].result_list) == {admission, other}
    assert set(by_mode.context["cl"].result_list) == {admission, other}


def test_audit_events_are_filtered_by_action_and_found_by_target(admin_client, assistant):
    session = key_session_open(workspace=assistant.tenant.workspace, user=assistant.tenant.member)
    key_session_revoke(session=session, revoked_by=assistant.tenant.member)
    url = admin_url(AuditEvent, "changelist")

    by_action = admin_client.get(url, {"action__exact": "key_session_revoked"})
    by_target = admin_client.get(url, {"q": str(session.pk)})
    by_org = admin_client.get(url, {"q": str(assistant.tenant.org.pk)})

    revoked = AuditEvent.objects.get(action="key_session_revoked")
    assert list(by_action.context["cl"].result_list) == [revoked]
    assert list(by_target.context["cl"].result_list) == [revoked]
    assert revoked in by_org.context["cl"].result_list
    assert KeySessionRevocation.objects.filter(key_session=session).exists()


SECRET_COLUMNS = {
    "ciphertext",
    "changes_ciphertext",
    "wrapped_key",
    "token_hash",
    "credential_digest",
    "capture_digest",
    "request_digest",
}


def test_no_admin_form_list_or_search_names_a_secret_column(admin_user, tenant):
    world_of(tenant)
    request = RequestFactory().get("/")
    request.user = admin_user

    named: dict[str, set[str]] = {}
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        row = model._default_manager.order_by("pk").first()
        columns = {
            *flatten_fieldsets(model_admin.get_fieldsets(request, row)),
            *model_admin.get_list_display(request),
            *(
                part
                for field in model_admin.get_search_fields(request)
                for part in field.lstrip("=^@").split("__")
            ),
        }
        named[model._meta.label] = {str(column) for column in columns} & SECRET_COLUMNS

    assert {label: found for label, found in named.items() if found} == {}


def test_every_sealed_column_is_never_loaded_by_its_admin():
    """A page that never loads ciphertext or a wrapped key cannot show it, whatever a later
    field list or column says."""
    unlisted = {
        model._meta.label: sorted(sealed - set(getattr(model_admin, "never_loaded", ())))
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PROJECT_APPS
        and (
            sealed := {
                field.attname
                for field in model._meta.concrete_fields
                if field.attname.endswith("ciphertext") or field.attname == "wrapped_key"
            }
        )
    }

    assert {label: columns for label, columns in unlisted.items() if columns} == {}


def nightly_purge_form(**changes: str) -> dict[str, object]:
    """The change form of the nightly org purge's schedule as its page fills it, with
    `changes` typed over it."""
    task = PeriodicTask.objects.get(task=PURGE_TASK)
    form = {
        "name": task.name,
        "regtask": task.task,
        "task": "",
        "enabled": "on",
        "crontab": task.crontab_id,
        "args": "[]",
        "kwargs": "{}",
        "headers": "{}",
    }
    return {**form, **changes}


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"regtask": "", "task": "automation.org_purge_sweeep"}, "No such task"),
        ({"args": "[1]"}, "does not take these arguments"),
        ({"kwargs": '{"org_id": 1}'}, "does not take these arguments"),
        ({"args": "{}"}, "a JSON list"),
        ({"kwargs": "[]"}, "a JSON object"),
        ({"crontab": ""}, "One of clocked, interval, crontab, or solar must be set."),
    ],
)
def test_the_nightly_purge_schedule_is_shown_and_a_broken_edit_is_refused_with_its_reason(
    admin_client, changes, error
):
    task = PeriodicTask.objects.get(task=PURGE_TASK)
    before = PeriodicTask.objects.filter(pk=task.pk).values().get()
    url = reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])
    shown = admin_client.get(reverse("admin:django_celery_beat_periodictask_changelist"))

    refused = admin_client.post(url, nightly_purge_form(**changes))

    assert task.name in shown.content.decode()
    assert refused.status_code == 200
    assert error in refused.content.decode()
    assert PeriodicTask.objects.filter(pk=task.pk).values().get() == before


def test_the_nightly_purge_schedule_takes_a_valid_edit(admin_client):
    task = PeriodicTask.objects.get(task=PURGE_TASK)
    url = reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])

    saved = admin_client.post(url, nightly_purge_form(description="after the backups"))

    assert saved.status_code == 302
    assert PeriodicTask.objects.get(pk=task.pk).description == "after the backups"
