"""Fixtures shared by every app's tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import override_settings
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from workspaces.models import Org, Team, User, Workspace
from workspaces.services import api_token_create, workspace_create, workspace_membership_ensure

_names = itertools.count(1)


@dataclass
class Tenant:
    org: Org
    team: Team
    workspace: Workspace
    admin: User
    member: User

    def client_for(self, user: User) -> APIClient:
        """An API client authenticated by a fresh personal access token of `user`."""
        _, raw = api_token_create(user=user, team=self.team, name="test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client


@pytest.fixture(autouse=True)
def _test_settings(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests never run collectstatic, so the hashed-name manifest does not exist.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session", autouse=True)
def _cache_per_worker() -> Iterator[None]:
    """Give each xdist worker its own Redis database: cache.clear() flushes a whole database."""
    backend = django_settings.CACHES["default"]
    if not backend["BACKEND"].endswith("RedisCache"):
        yield
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base, _, _ = backend["LOCATION"].rpartition("/")
    location = f"{base}/{1 + int(worker) % 15}"
    with override_settings(CACHES={"default": {**backend, "LOCATION": location}}):
        yield


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def make_tenant(db: None) -> Callable[..., Tenant]:
    """Build an org, team and workspace with an admin and a plain member."""

    def make(*, ai_enabled: bool = True) -> Tenant:
        n = next(_names)
        org = Org.objects.create(name=f"org {n}")
        team = Team.objects.create(org=org, name=f"team {n}")
        admin = User.objects.create_user(username=f"admin{n}", password="pw-admin-123")
        member = User.objects.create_user(username=f"member{n}", password="pw-member-123")
        workspace = workspace_create(
            team=team, name=f"workspace {n}", admin=admin, ai_enabled=ai_enabled
        )
        workspace_membership_ensure(workspace=workspace, user=member)
        return Tenant(org=org, team=team, workspace=workspace, admin=admin, member=member)

    return make


@pytest.fixture
def tenant(make_tenant: Callable[..., Tenant]) -> Tenant:
    return make_tenant()
