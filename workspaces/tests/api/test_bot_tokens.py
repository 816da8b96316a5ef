"""Bot tokens: issued by a team owner, shown once, audited and revocable like a person's token;
they authenticate the bot (a `bot` credential carrying it) only where a route takes bots."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from workspaces.authentication import BearerAuthentication, BotBearerAuthentication
from workspaces.errors import CredentialKindRefused, TeamOwnerRequired, TokenScopeRefused
from workspaces.models import ApiToken, AuditEvent
from workspaces.selectors import api_token_list_for_user
from workspaces.services import (
    TOKEN_USE_RESOLUTION,
    api_token_create,
    api_token_revoke,
    bot_token_issue,
)


def authenticate(authentication: type[BearerAuthentication], raw: str):
    request = Request(APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {raw}"))
    return authentication().authenticate(request)


@pytest.fixture
def bot(tenant):
    return tenant.bot_create("helper")


def test_a_bot_token_authenticates_the_bot_where_a_route_takes_bots(tenant, bot):
    token, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci", minted_with="session")

    user, credential = authenticate(BotBearerAuthentication, raw)

    assert credential.kind == "bot"
    assert credential.bot == bot
    assert (credential.team, credential.token_id, user) == (tenant.team, token.pk, tenant.admin)
    assert (token.scope, token.bot, token.user) == ("bot", bot, tenant.admin)


def test_a_bot_token_is_not_a_persons_credential(tenant, bot):
    _, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci")

    with pytest.raises(CredentialKindRefused):
        authenticate(BearerAuthentication, raw)


@pytest.mark.parametrize("scope", ["api", "mcp"])
def test_a_persons_token_is_not_a_bots(tenant, scope):
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="me", scope=scope)

    with pytest.raises(TokenScopeRefused) as refused:
        authenticate(BotBearerAuthentication, raw)

    assert refused.value.detail == {"scope": scope, "requiredScope": "bot"}


def test_a_revoked_bot_token_ends_at_once_and_is_audited(tenant, bot):
    token, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci")

    api_token_revoke(token=token, actor=tenant.admin)

    with pytest.raises(AuthenticationFailed, match="Token revoked"):
        authenticate(BotBearerAuthentication, raw)
    actions = AuditEvent.objects.filter(target_type="api_token", target_id=str(token.pk))
    assert sorted(actions.values_list("action", flat=True)) == [
        "bot_token_issued",
        "bot_token_revoked",
    ]
    assert actions.get(action="bot_token_issued").detail["botId"] == "helper"
    revoked = actions.get(action="bot_token_revoked")
    assert (revoked.actor, revoked.detail["botId"]) == (tenant.admin, "helper")


def test_a_bot_token_ends_when_its_issuer_leaves_the_team(tenant, bot):
    _, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci")
    tenant.admin.team_memberships.all().delete()

    with pytest.raises(AuthenticationFailed, match="Token owner unavailable"):
        authenticate(BotBearerAuthentication, raw)


def test_only_a_team_owner_issues_a_bot_token_and_only_from_a_session(tenant, bot):
    with pytest.raises(TeamOwnerRequired):
        bot_token_issue(bot=bot, actor=tenant.member, name="ci")
    with pytest.raises(CredentialKindRefused):
        bot_token_issue(bot=bot, actor=tenant.admin, name="ci", minted_with="pat")

    assert not ApiToken.objects.filter(bot=bot).exists()


def test_a_persons_token_list_leaves_out_the_bot_tokens_they_issued(tenant, bot):
    bot_token_issue(bot=bot, actor=tenant.admin, name="ci")
    own, _ = api_token_create(user=tenant.admin, team=tenant.team, name="mine")

    assert list(api_token_list_for_user(user=tenant.admin, team=tenant.team)) == [own]


def test_a_token_records_its_last_use_once_a_minute_and_only_when_it_authenticates(tenant, bot):
    token, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci")
    with pytest.raises(CredentialKindRefused):
        authenticate(BearerAuthentication, raw)
    token.refresh_from_db()
    assert token.last_used_at is None

    authenticate(BotBearerAuthentication, raw)
    token.refresh_from_db()
    first = token.last_used_at
    authenticate(BotBearerAuthentication, raw)
    token.refresh_from_db()
    assert token.last_used_at == first is not None

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - 2 * TOKEN_USE_RESOLUTION)
    authenticate(BotBearerAuthentication, raw)
    token.refresh_from_db()
    assert token.last_used_at > first
