"""A name a person types (workspace, bot, token, team, org) is refused if it holds a character
that displays as nothing, as a memory space's name and a document path are: `Research` and
`Re\u200bsearch`, or a right-to-left override that shows `txt.exe` as `exe.txt`, would read
alike while being two names."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from conftest import assert_error
from workspaces.models import ApiToken, Bot, Org, Team, Workspace

INVISIBLE = [
    "Re\u200bsearch",
    "Re\u202esearch",
    "Re\u034fsearch",
    "Re\u3164search",
]  # NUL: DRF refuses it first


def refusal_names_the_field(response, field: str) -> None:
    error = assert_error(response, 400, "VALIDATION_FAILED")
    (problem,) = error["detail"]["fields"][field]
    assert "invisible character" in problem, problem


@pytest.fixture
def owner(tenant):
    """The tenant's admin, a team owner, signed in to the web frame."""
    tenant.bot_create("first")
    client = APIClient()
    client.force_login(tenant.admin)
    return client


@pytest.mark.parametrize("name", INVISIBLE)
def test_a_workspace_name_holding_an_invisible_character_is_refused(tenant, name):
    response = tenant.client_for(tenant.member).post(
        "/api/v1/workspaces", {"name": name}, format="json"
    )

    refusal_names_the_field(response, "name")
    assert not Workspace.objects.filter(name=name).exists()


def test_names_that_read_as_they_are_are_taken(tenant, owner):
    for name in ["Ré search", "研究", "R&D / Ops", "עברית"]:
        response = tenant.client_for(tenant.member).post(
            "/api/v1/workspaces", {"name": name}, format="json"
        )
        assert response.status_code == 201, response.content
    created = owner.post(
        "/api/v1/bots", {"id": "b", "name": "Hélène", "runtime": "pi"}, format="json"
    )
    assert created.status_code == 201, created.content


def test_a_token_name_holding_an_invisible_character_is_refused(owner):
    response = owner.post("/api/v1/tokens", {"name": "lap\u200dtop"}, format="json")

    refusal_names_the_field(response, "name")
    assert not ApiToken.objects.filter(name="lap\u200dtop").exists()


def test_a_bot_name_holding_an_invisible_character_is_refused_on_create_and_change(owner):
    created = owner.post(
        "/api/v1/bots", {"id": "helper", "name": "Hel\u2066per", "runtime": "pi"}, format="json"
    )
    changed = owner.patch("/api/v1/bots/first", {"name": "Fi\ufeffrst"}, format="json")

    refusal_names_the_field(created, "name")
    refusal_names_the_field(changed, "name")
    assert not Bot.objects.filter(slug="helper").exists()
    assert Bot.objects.get(slug="first").name != "Fi\ufeffrst"


def test_a_bot_token_name_holding_an_invisible_character_is_refused(owner):
    response = owner.post("/api/v1/bots/first/tokens", {"name": "ci\u180e"}, format="json")

    refusal_names_the_field(response, "name")


@pytest.mark.parametrize("model", [Org, Team, Workspace, Bot, ApiToken])
def test_the_admin_refuses_the_same_names(model):
    """The admin validates a model's fields (`full_clean`): team and org names are typed there."""
    with pytest.raises(ValidationError) as raised:
        model._meta.get_field("name").clean("Ops\u202e", None)

    assert "invisible character" in str(raised.value)
