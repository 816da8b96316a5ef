"""Fixtures for the suites that walk the whole API: every object a route names by id."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.test import APIClient

from automation.authentication import DeliveryCredentialAuthentication
from automation.services import conversation_create, message_admit
from automation.tokens import delivery_credential_cache_key
from conftest import Tenant
from memory.edits import parse_changes
from memory.services import memory_proposal_create, memory_save
from workspaces.authentication import (
    BearerAuthentication,
    BotBearerAuthentication,
    TeamSessionAuthentication,
)
from workspaces.services import (
    api_token_create,
    bot_token_issue,
    key_session_open,
    workspace_key_ensure,
)


@dataclass
class TenantWorld:
    """One tenant's member, a credential of each kind, and one object for every id a route
    takes, keyed by the route's keyword (`workspace_id`, `conversation_id`, ...)."""

    tenant: Tenant
    ids: dict[str, Any]
    clients: dict[type, APIClient]
    # The member's personal access token, as an Authorization header.
    bearer: str


def _world(tenant: Tenant, capture_on_commit: Callable[..., Any]) -> TenantWorld:
    member, workspace = tenant.member, tenant.workspace
    memory_save(workspace=workspace, author=member, base_version=0, content="- likes tea\n")
    conversation = conversation_create(workspace=workspace, owner=member)
    session = key_session_open(workspace=workspace, user=member)
    proposal = memory_proposal_create(
        workspace=workspace,
        admission_id=uuid.uuid4(),
        changes=parse_changes([{"op": "add", "line": "- likes green tea"}]),
        base_version=1,
        clear_generation=0,
        reason="read_only",
        data_key=workspace_key_ensure(workspace=workspace),
    )
    token, _ = api_token_create(user=member, team=tenant.team, name="listed")
    # Bot ids are unique per team only: each world's differs, so that a route reached with
    # another world's bot id cannot find the caller's own bot of that name.
    bot = tenant.bot_create(f"bot-{tenant.team.pk}")
    _, raw_bot_token = bot_token_issue(bot=bot, actor=tenant.admin, name="listed")
    as_bot = APIClient()
    as_bot.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_bot_token}")
    _, raw_token = api_token_create(user=member, team=tenant.team, name="caller")
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    with capture_on_commit(execute=True):
        admission = message_admit(
            conversation=conversation_create(workspace=workspace, owner=member),
            sender=member,
            text="hello",
            idempotency_key="world",
            key_session_id=session.pk,
            memory_state=None,
        ).admission
    delivery = APIClient()
    delivery.credentials(
        HTTP_AUTHORIZATION=f"Delivery {cache.get(delivery_credential_cache_key(admission.pk))}"
    )
    signed_in = APIClient()
    signed_in.force_login(member)
    return TenantWorld(
        tenant=tenant,
        ids={
            "workspace_id": workspace.pk,
            "conversation_id": conversation.pk,
            "session_id": session.pk,
            "proposal_id": proposal.pk,
            "version": 1,
            "token_id": token.pk,
            "bot_id": bot.slug,
            "user_id": member.pk,
        },
        clients={
            BearerAuthentication: bearer,
            TeamSessionAuthentication: signed_in,
            DeliveryCredentialAuthentication: delivery,
            BotBearerAuthentication: as_bot,
        },
        bearer=f"Bearer {raw_token}",
    )


@pytest.fixture
def make_world(
    make_tenant, django_capture_on_commit_callbacks, turns_held
) -> Callable[[], TenantWorld]:
    return lambda: _world(make_tenant(), django_capture_on_commit_callbacks)


@pytest.fixture
def wsgi_keeps_the_test_connection() -> Iterator[None]:
    """Let a test call a WSGI application in-process on its own database connection.

    Django closes a connection outside autocommit at each request's start and end, and the
    test's transaction is one; Django's test client disconnects the same signal handler.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
