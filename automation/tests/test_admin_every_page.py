"""Every page of the admin as the staff who inspect receipts use it: a superuser and a
view-only staff member walk every registered model (Django's and the libraries' too, taken
from the admin's registry, never from a list kept here): its list, a search, every choice
of every list filter, one row's change (or view) page, the add, delete and history pages.
Nothing answers 500, no page shows memory text or a secret, and the view-only member's every
POST (add, change, delete, each bulk action) is refused and changes no row."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.db.models import Model
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, IntervalSchedule, SolarSchedule

from automation.models import Admission, DeliveryCredential
from automation.tests.test_admin import MARKER, spellings_of, world_of
from automation.tests.test_purge import make_due, org_space
from memory.models import SpaceKey
from memory.spaces.database import DatabaseStore, space_data_key
from memory.spaces.quotas import quotas_for
from memory.tests.spaces.conftest import store_write
from workspaces.models import ApiToken, Org, User, WorkspaceKey
from workspaces.selectors import workspace_data_key
from workspaces.services import api_token_create, bot_token_issue

SPACE_MARKER = "okapi-lantern-5190"
PASSWORD_MARKER = "walrus-piano-2604"


def admin_url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def seeded_secrets(tenant) -> set[str]:
    """A world with a row of every registered kind, made by the services where the project
    owns them, and every string that must never appear on an admin page."""
    world_of(tenant)  # MARKER in memory, a note, a proposal and a transcript message
    space = org_space(tenant.team)
    marked = f"{SPACE_MARKER}\n".encode()
    store_write(DatabaseStore(), space, "marked.md", marked, expected=0, quotas=quotas_for(space))
    _, raw_token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    _, raw_bot_token = bot_token_issue(
        bot=tenant.bot_create("inspected"), actor=tenant.admin, name="ci"
    )
    # A failed sign-in, for the sign-in attempt pages: its password is a secret.
    Client().post(reverse("admin:login"), {"username": "nobody", "password": PASSWORD_MARKER})
    # An org past its grace period, so that running the nightly purge would change rows.
    make_due(Org.objects.create(name="due for purge"))
    # The libraries' own rows that no service of the project makes.
    Group.objects.create(name="inspectors")
    IntervalSchedule.objects.create(every=1, period=IntervalSchedule.HOURS)
    ClockedSchedule.objects.create(clocked_time=timezone.now() + timedelta(days=1))
    SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35)
    AccessLog.objects.create(username="nobody", ip_address="127.0.0.1", user_agent="test")
    AccessFailureLog.objects.create(username="nobody", ip_address="127.0.0.1", user_agent="test")
    data_keys = [
        workspace_data_key(workspace=tenant.workspace),
        space_data_key(tenant_id=tenant.team.pk),
    ]
    keys = [
        *(key for key in data_keys if key is not None),
        *(bytes(k) for k in WorkspaceKey.objects.values_list("wrapped_key", flat=True)),
        *(bytes(k) for k in SpaceKey.objects.values_list("wrapped_key", flat=True)),
    ]
    assert None not in data_keys
    return {
        MARKER,
        SPACE_MARKER,
        PASSWORD_MARKER,
        raw_token,
        raw_bot_token,
        *(spelling for key in keys for spelling in spellings_of(key)),
        *ApiToken.objects.values_list("token_hash", flat=True),
        *DeliveryCredential.objects.values_list("credential_digest", flat=True),
        *Admission.objects.values_list("credential_digest", flat=True),
        *Admission.objects.values_list("request_digest", flat=True),
        *Admission.objects.exclude(capture_digest="").values_list("capture_digest", flat=True),
    }


def superuser() -> User:
    return User.objects.create_superuser(username="root", password="pw-root-123")


def view_only_staff() -> User:
    user = User.objects.create_user(username="inspector", password="pw-inspect-123", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return user


def every_row() -> dict[str, list[dict[str, Any]]]:
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in admin.site._registry
    }


def walk_pages(client: Client, model: type[Model], row: Model) -> dict[str, Any]:
    """GET every page of `model`'s admin; returns each response by URL."""
    responses: dict[str, Any] = {}

    def get(url: str) -> Any:
        try:
            responses[url] = client.get(url)
        except Exception as error:  # the test client re-raises what would be a 500
            responses[url] = error
        return responses[url]

    changelist = get(admin_url(model, "changelist"))
    get(admin_url(model, "changelist") + "?q=x")
    if getattr(changelist, "context", None) and "cl" in changelist.context:
        cl = changelist.context["cl"]
        for spec in cl.filter_specs:
            for choice in spec.choices(cl):
                get(admin_url(model, "changelist") + choice["query_string"])
    for view in ("change", "delete", "history"):
        get(admin_url(model, view, row.pk))
    get(admin_url(model, "add"))
    return responses


def refused_posts(client: Client, model: type[Model], row: Model, actions: list[str]) -> list[str]:
    """POST every write the admin has for `model`, as someone who may only look; returns
    each POST that was not refused (answered other than 403, or changed a row). Rows are
    compared after each POST, so that two actions undoing each other (disable, then
    toggle) cannot hide one another."""
    posts = {
        "add": (admin_url(model, "add"), {}),
        "change": (admin_url(model, "change", row.pk), {}),
        "delete": (admin_url(model, "delete", row.pk), {"post": "yes"}),
        **{
            f"action {action}": (
                admin_url(model, "changelist"),
                {"action": action, "_selected_action": [row.pk], "post": "yes", "apply": "1"},
            )
            for action in actions
        },
    }
    problems = []
    for name, (url, data) in posts.items():
        before = every_row()
        answer = client.post(url, data)
        if not name.startswith("action") and answer.status_code != 403:
            problems.append(f"POST {name}: {answer.status_code}")
        if every_row() != before:
            problems.append(f"POST {name} changed rows")
    return problems


ROLES: dict[str, Callable[[], User]] = {"superuser": superuser, "view-only staff": view_only_staff}


@pytest.mark.parametrize("role", ROLES)
def test_every_admin_page_answers_and_shows_no_memory_text_or_secret(tenant, role):
    secrets = seeded_secrets(tenant)
    client = Client()
    client.force_login(ROLES[role]())
    # The bulk actions a superuser is offered, which the view-only member posts too.
    actions_request = RequestFactory().get("/")
    actions_request.user = (
        superuser() if role != "superuser" else User.objects.get(is_superuser=True)
    )

    broken: dict[str, object] = {}
    leaks: dict[str, list[str]] = {}
    unrefused: dict[str, list[str]] = {}
    for model, model_admin in admin.site._registry.items():
        row = model._default_manager.order_by("pk").first()
        assert row is not None, f"the world has no {model._meta.label} row to render"
        responses = walk_pages(client, model, row)
        for url, response in responses.items():
            if isinstance(response, Exception):
                broken[url] = repr(response)
                continue
            if response.status_code >= 500:
                broken[url] = response.status_code
            page = response.content.decode(errors="replace")
            found = sorted(secret for secret in secrets if secret in page)
            if found:
                leaks[url] = found
        must_answer = [admin_url(model, "changelist"), admin_url(model, "history", row.pk)]
        must_answer.append(admin_url(model, "change", row.pk))
        for url in must_answer:
            response = responses[url]
            if not isinstance(response, Exception) and response.status_code != 200:
                broken[url] = response.status_code
        if role == "superuser":
            continue
        for view in ("add", "delete"):
            response = responses[admin_url(model, view, *(() if view == "add" else (row.pk,)))]
            if not isinstance(response, Exception) and response.status_code != 403:
                unrefused.setdefault(model._meta.label, []).append(f"GET {view}")
        actions = list(model_admin.get_actions(actions_request))
        problems = refused_posts(client, model, row, actions)
        if problems:
            unrefused.setdefault(model._meta.label, []).extend(problems)

    assert broken == {}
    assert leaks == {}
    assert unrefused == {}
