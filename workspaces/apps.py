from typing import Any

from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.http import HttpRequest


class WorkspacesConfig(AppConfig):
    name = "workspaces"
    verbose_name = "Tenancy and workspaces"

    def ready(self) -> None:
        # Registers the OpenAPI descriptions of this app's credentials.
        from workspaces.api import schema  # noqa: F401

        # Django's auth signals are the one hook that every sign-in path fires (the web
        # frame's form, the admin's, and any added later), so the audit of sign-ins hangs
        # there rather than in each view. It records; it decides nothing.
        user_logged_in.connect(_sign_in_succeeded, dispatch_uid="workspaces.sign_in_audit")
        user_login_failed.connect(_sign_in_failed, dispatch_uid="workspaces.sign_in_audit")


def _sign_in_succeeded(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    from workspaces.services import sign_in_audit

    sign_in_audit(actor=user, is_success=True, request=request)


def _sign_in_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    from workspaces.models import User
    from workspaces.services import sign_in_audit

    username = credentials.get(User.USERNAME_FIELD)
    account = User.objects.filter(username=username).first() if username else None
    sign_in_audit(actor=account, is_success=False, request=request)
