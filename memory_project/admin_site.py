"""The admin site: Django's, except that signing out is the web frame's sign-out.

Staff use one browser session for the frame and the admin, and the key sessions the frame opens
for the assistant belong to that browser session. Signing out must revoke them whichever page it
starts from, and the house rule keeps that out of login/logout signals (workspaces/views.py),
so the admin's logout, the view behind `admin:logout`, is the frame's `sign_out` itself: one
code path, not a second copy of the revocation.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse

from workspaces.views import sign_out


class MemoryAdminSite(AdminSite):
    # Django's stubs type this view's answer as a TemplateResponse; any response will do for
    # the URL it is mounted at, and the frame's answers a signed-out POST with a redirect.
    def logout(  # type: ignore[override]
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return sign_out(request)
