"""The bot routes: validating a spec saves nothing; creating refuses a spec with an error;
only owners create and issue; tenancy comes from the credential."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from conftest import assert_error
from memory.bots import bot_update
from workspaces.models import ApiToken, Bot, TeamMembership

VALIDATE = "/api/v1/bots/validate"


@pytest.fixture
def owner(tenant):
    """The tenant's admin, made a team owner, signed in to the web frame."""
    tenant.bot_create("first")  # makes the admin the team's owner
    client = APIClient()
    client.force_login(tenant.admin)
    return client


def test_validate_answers_the_diagnostics_and_saves_nothing(tenant):
    client = tenant.client_for(tenant.member)

    response = client.post(
        VALIDATE,
        {"runtime": "kimi", "memory": {"visibility": "team"}, "autoMemory": "on"},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert response.json() == {
        "diagnostics": [
            {
                "code": "C047",
                "severity": "warning",
                "field": "memory",
                "message": "The kimi runtime cannot call the memory tools; "
                "this memory spec does nothing there.",
            },
            {
                "code": "C170",
                "severity": "error",
                "field": "visibility",
                "message": "Unknown visibility `team` (private, bot, project, cross_project, "
                "user, org, global).",
            },
            {
                "code": "C132",
                "severity": "warning",
                "field": "auto_memory",
                "message": "The kimi runtime ignores auto-memory; it stays off.",
            },
        ]
    }
    assert not Bot.objects.exists()


def test_validate_a_clean_spec(tenant):
    response = tenant.client_for(tenant.member).post(
        VALIDATE, {"runtime": "claw", "memory": {"visibility": "org"}}, format="json"
    )

    assert response.json() == {"diagnostics": []}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"runtime": "gpt"},
        {"runtime": "claw", "memory": ["visibility"]},
        {"runtime": "claw", "memory": "org"},
    ],
)
def test_validate_refuses_a_malformed_body(tenant, body):
    response = tenant.client_for(tenant.member).post(VALIDATE, body, format="json")

    assert_error(response, 400, "VALIDATION_FAILED")


def test_an_owner_creates_a_bot_and_members_list_the_teams_bots(tenant, make_tenant, owner):
    make_tenant().bot_create("elsewhere")

    created = owner.post(
        "/api/v1/bots",
        {"id": "helper", "name": "Helper", "runtime": "claw", "memory": {"visibility": "org"}},
        format="json",
    )
    listed = tenant.client_for(tenant.member).get("/api/v1/bots")

    assert created.status_code == 201, created.content
    assert created.json()["id"] == "helper"
    assert created.json()["autoMemory"] == ""
    assert [bot["id"] for bot in listed.json()["results"]] == ["first", "helper"]


def test_a_spec_with_an_error_is_refused_with_its_diagnostics(owner):
    response = owner.post(
        "/api/v1/bots",
        {"id": "helper", "name": "H", "runtime": "claw", "memory": {"enabled": True}},
        format="json",
    )

    error = assert_error(response, 400, "BOT_SPEC_INVALID")
    assert [d["code"] for d in error["detail"]["diagnostics"]] == ["C048"]
    assert not Bot.objects.filter(slug="helper").exists()


def test_a_member_who_is_not_an_owner_cannot_create_a_bot(tenant):
    response = tenant.client_for(tenant.member).post(
        "/api/v1/bots", {"id": "helper", "name": "H", "runtime": "claw"}, format="json"
    )

    assert_error(response, 403, "TEAM_OWNER_REQUIRED")
    assert not Bot.objects.exists()


def test_a_taken_bot_id_is_409(owner):
    response = owner.post(
        "/api/v1/bots", {"id": "first", "name": "F", "runtime": "pi"}, format="json"
    )

    assert_error(response, 409, "BOT_SLUG_TAKEN")


def test_an_owner_issues_a_bot_token_once_and_revokes_it(tenant, owner):
    issued = owner.post("/api/v1/bots/first/tokens", {"name": "ci"}, format="json")
    raw = issued.json()["token"]
    bot_client = APIClient()
    bot_client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert issued.status_code == 201, issued.content
    assert issued.json()["scope"] == "bot"
    assert_error(bot_client.get("/api/v1/workspaces"), 403, "CREDENTIAL_KIND_REFUSED")
    token_id = issued.json()["id"]
    revoked = owner.delete(f"/api/v1/bots/first/tokens/{token_id}")
    assert revoked.status_code == 204
    assert ApiToken.objects.get(pk=token_id).revoked_at is not None
    assert_error(bot_client.get("/api/v1/workspaces"), 401, "TOKEN_REVOKED")


def test_a_bot_token_is_issued_only_from_a_session_and_only_by_an_owner(tenant, owner):
    by_token = tenant.client_for(tenant.admin).post(
        "/api/v1/bots/first/tokens", {"name": "x"}, format="json"
    )
    TeamMembership.objects.filter(user=tenant.admin).update(role="member")
    by_member = owner.post("/api/v1/bots/first/tokens", {"name": "x"}, format="json")

    assert_error(by_token, 403, "CREDENTIAL_KIND_REFUSED")
    assert_error(by_member, 403, "TEAM_OWNER_REQUIRED")
    assert not ApiToken.objects.filter(bot__isnull=False).exists()


def test_another_teams_bot_is_404(make_tenant, owner):
    other = make_tenant().bot_create("theirs")

    response = owner.post(f"/api/v1/bots/{other.slug}/tokens", {"name": "x"}, format="json")

    assert_error(response, 404, "NOT_FOUND")


# ---- one bot: read, change, its tokens --------------------------------------------------


def test_a_member_reads_a_bot_and_its_tokens_but_never_a_secret(tenant, owner):
    issued = owner.post("/api/v1/bots/first/tokens", {"name": "ci"}, format="json").json()
    member = tenant.client_for(tenant.member)

    bot = member.get("/api/v1/bots/first")
    tokens = member.get("/api/v1/bots/first/tokens")

    assert bot.status_code == 200, bot.content
    assert bot.json()["id"] == "first"
    assert tokens.status_code == 200, tokens.content
    listed = tokens.json()["results"]
    assert [(t["id"], t["name"], t["lastUsedAt"], t["revokedAt"]) for t in listed] == [
        (issued["id"], "ci", None, None)
    ]
    assert issued["token"] not in tokens.content.decode()
    assert "token" not in tokens.json()["results"][0]


def test_a_token_list_shows_its_last_use_and_its_revocation(tenant, owner):
    issued = owner.post("/api/v1/bots/first/tokens", {"name": "ci"}, format="json").json()
    used = timezone.now() - timedelta(hours=1)
    ApiToken.objects.filter(pk=issued["id"]).update(last_used_at=used)
    owner.delete(f"/api/v1/bots/first/tokens/{issued['id']}")

    listed = owner.get("/api/v1/bots/first/tokens").json()["results"]

    assert parse_datetime(listed[0]["lastUsedAt"]) == used
    assert listed[0]["revokedAt"] is not None


def test_an_owner_changes_a_bots_name_runtime_and_spec(owner):
    response = owner.patch(
        "/api/v1/bots/first",
        {"name": "First", "runtime": "mcp", "memory": {"visibility": "org"}, "autoMemory": "off"},
        format="json",
    )

    assert response.status_code == 200, response.content
    bot = Bot.objects.get(slug="first")
    assert (bot.name, bot.runtime, bot.memory_spec, bot.auto_memory) == (
        "First",
        "mcp",
        {"visibility": "org"},
        "off",
    )
    assert response.json()["memory"] == {"visibility": "org"}


def test_a_patch_leaves_the_fields_it_does_not_name(owner):
    owner.patch("/api/v1/bots/first", {"memory": {"visibility": "org"}}, format="json")

    response = owner.patch("/api/v1/bots/first", {"name": "Renamed"}, format="json")

    assert response.status_code == 200, response.content
    bot = Bot.objects.get(slug="first")
    assert (bot.name, bot.memory_spec) == ("Renamed", {"visibility": "org"})


@pytest.mark.parametrize(
    "text",
    [
        "visibility: org\nautoload: ['*.md']\n",
        '{"visibility": "org", "autoload": ["*.md"]}',
    ],
)
def test_a_spec_may_be_sent_as_yaml_or_json_text(owner, text):
    response = owner.patch("/api/v1/bots/first", {"memory": text}, format="json")

    assert response.status_code == 200, response.content
    assert Bot.objects.get(slug="first").memory_spec == {"visibility": "org", "autoload": ["*.md"]}


@pytest.mark.parametrize("text", ["visibility: [org", "- org\n- bot\n"])
def test_spec_text_that_is_not_an_object_is_malformed(owner, text):
    response = owner.patch("/api/v1/bots/first", {"memory": text}, format="json")

    assert_error(response, 400, "VALIDATION_FAILED")
    assert Bot.objects.get(slug="first").memory_spec is None


def test_a_patch_with_an_invalid_spec_is_refused_and_changes_nothing(owner):
    owner.patch("/api/v1/bots/first", {"memory": {"visibility": "org"}}, format="json")

    response = owner.patch(
        "/api/v1/bots/first",
        {"name": "Changed", "memory": {"visibility": "team"}, "autoMemory": "maybe"},
        format="json",
    )

    error = assert_error(response, 400, "BOT_SPEC_INVALID")
    assert [(d["code"], d["severity"]) for d in error["detail"]["diagnostics"]] == [
        ("C170", "error"),
        ("C131", "error"),
    ]
    bot = Bot.objects.get(slug="first")
    assert (bot.name, bot.memory_spec, bot.auto_memory) == ("first", {"visibility": "org"}, "")


def test_a_new_runtime_is_judged_with_the_spec_it_keeps(owner):
    owner.patch("/api/v1/bots/first", {"autoMemory": "on"}, format="json")

    response = owner.patch("/api/v1/bots/first", {"runtime": "kimi"}, format="json")

    assert response.status_code == 200, response.content  # C132 only warns
    assert Bot.objects.get(slug="first").runtime == "kimi"


def test_a_member_reads_but_cannot_change_a_bot(tenant, owner):
    response = tenant.client_for(tenant.member).patch(
        "/api/v1/bots/first", {"name": "Mine"}, format="json"
    )

    assert_error(response, 403, "TEAM_OWNER_REQUIRED")
    assert Bot.objects.get(slug="first").name == "first"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("get", ""), ("patch", ""), ("get", "/tokens"), ("delete", "/tokens/1")],
)
def test_another_teams_bot_is_404_on_every_verb(make_tenant, owner, method, suffix):
    other = make_tenant().bot_create("theirs")

    body = None if method == "get" else {"name": "x"}  # a GET's data would be its query
    response = getattr(owner, method)(f"/api/v1/bots/{other.slug}{suffix}", body, format="json")

    assert_error(response, 404, "NOT_FOUND")
    other.refresh_from_db()
    assert other.name == "theirs"


def test_a_bot_that_does_not_exist_is_404(owner):
    assert_error(owner.get("/api/v1/bots/nobody"), 404, "NOT_FOUND")


@pytest.mark.parametrize("visibility", ["user", "private"])
@pytest.mark.parametrize("method", ["post", "patch"])
def test_an_owner_cannot_give_a_bot_another_persons_own_space(tenant, owner, visibility, method):
    spec = {"visibility": visibility, "user": tenant.member.pk}
    url, body = {
        "post": ("/api/v1/bots", {"id": "helper", "name": "H", "runtime": "claw", "memory": spec}),
        "patch": ("/api/v1/bots/first", {"memory": spec}),
    }[method]

    response = getattr(owner, method)(url, body, format="json")

    error = assert_error(response, 400, "BOT_SPEC_INVALID")
    assert error["detail"]["field"] == "user"
    assert [d["field"] for d in error["detail"]["diagnostics"]] == ["user"]
    assert not Bot.objects.filter(slug="helper").exists()
    assert Bot.objects.get(slug="first").memory_spec is None


@pytest.mark.parametrize("visibility", ["user", "private"])
def test_validate_judges_the_spec_as_saving_it_would_judge_the_caller(tenant, owner, visibility):
    def diagnostics(client, user):
        spec = {"visibility": visibility, "user": user.pk}
        response = client.post(VALIDATE, {"runtime": "claw", "memory": spec}, format="json")
        assert response.status_code == 200, response.content
        return [(d["code"], d["severity"], d["field"]) for d in response.json()["diagnostics"]]

    assert diagnostics(owner, tenant.member) == [("C051", "error", "user")]
    assert diagnostics(owner, tenant.admin) == []
    # the member judged by their own token: their own space is theirs to give
    assert diagnostics(tenant.client_for(tenant.member), tenant.member) == []


def test_validate_of_a_bots_spec_lets_the_user_its_stored_spec_names_stay(tenant, owner):
    # given: staff gave the bot the member's space; its owner edits it
    spec = {"visibility": "user", "user": tenant.member.pk}
    bot_update(bot=Bot.objects.get(slug="first"), actor=None, memory=spec)
    body = {"runtime": "pi", "memory": spec, "bot": "first"}

    response = owner.post(VALIDATE, body, format="json")

    # then: as saving the edit would, only the runtime's warning, no C051
    assert [d["code"] for d in response.json()["diagnostics"]] == ["C047"]
    assert owner.patch("/api/v1/bots/first", {"runtime": "pi"}, format="json").status_code == 200
    assert_error(owner.post(VALIDATE, body | {"bot": "nobody"}, format="json"), 404, "NOT_FOUND")


@pytest.mark.parametrize("visibility", ["user", "private"])
def test_an_owner_may_give_a_bot_their_own_space(tenant, owner, visibility):
    spec = {"visibility": visibility, "user": tenant.admin.pk}

    response = owner.patch("/api/v1/bots/first", {"memory": spec}, format="json")

    assert response.status_code == 200, response.content
    assert Bot.objects.get(slug="first").memory_spec == spec
