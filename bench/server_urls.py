"""The URLconf of the gunicorn the HTTP benchmarks start: every product route, plus a bare
Django view that exists only here (never a product route). Not a benchmark itself."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from memory_project.urls import handler400, handler404, handler500, urlpatterns

BARE_PATH = "/bench/bare"


def bare(request: HttpRequest) -> HttpResponse:
    """The least a Django view can answer, through the product's whole middleware stack:
    the yardstick for what authentication, DRF and throttling add to the ping."""
    return HttpResponse(b'{"ok":true}', content_type="application/json")


urlpatterns = [path(BARE_PATH.lstrip("/"), bare), *urlpatterns]

__all__ = ["handler400", "handler404", "handler500", "urlpatterns"]
