"""What the browser tests share: Debian's chromium driven by Playwright (sync API) against
pytest-django's live_server, one browser per test session and a fresh context per test.

The fixtures are registered once for the whole suite, as a plugin named in the root
conftest (`pytest_plugins`), so every app's `test_browser_*.py` requests them by name.
Browsers are never downloaded: the tests use /usr/bin/chromium, which `.ci/run` installs
from Debian, and are skipped with a visible reason where it is missing.

The event loop. Playwright's sync API runs its asyncio loop in a greenlet of this thread
and, between calls, leaves that loop marked as this thread's running loop. Left so for the
whole session, every later test in the same worker would see a "running loop": Django
refuses ORM calls then, and `asyncio.run`/`anyio.run` (the MCP tests) refuse to start.
So the marker is set only while a browser test runs (`browser_context`) and cleared in
between; nothing runs on that loop in between, since it only turns during Playwright calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.test import Client
from playwright.sync_api import ViewportSize

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
NARROW: ViewportSize = {"width": 375, "height": 812}
WIDE: ViewportSize = {"width": 1280, "height": 900}

requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)",
)


@dataclass(frozen=True)
class BrowserSession:
    browser: Browser
    loop: asyncio.AbstractEventLoop


@pytest.fixture(scope="session")
def browser_session() -> Iterator[BrowserSession]:
    """The one browser of this test process, launched at first use, closed at the end."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    loop = asyncio.get_running_loop()
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    asyncio._set_running_loop(None)
    yield BrowserSession(browser=browser, loop=loop)
    asyncio._set_running_loop(loop)
    try:
        browser.close()
    finally:
        playwright.stop()


@pytest.fixture
def new_context(
    browser_session: BrowserSession, live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., BrowserContext]]:
    """Make fresh browser contexts (closed after the test): `new_context(viewport=NARROW)`."""
    # The test body is plain synchronous code; only Playwright's loop is "running" here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # Chromium keeps HTTP connections alive, so a live-server thread can sit between two
    # requests holding a persistent (CONN_MAX_AGE) PostgreSQL connection, which would block
    # the flush after the test and the test database's drop. Close it after each request.
    monkeypatch.setitem(connections.settings[DEFAULT_DB_ALIAS], "CONN_MAX_AGE", 0)
    asyncio._set_running_loop(browser_session.loop)
    contexts: list[BrowserContext] = []

    def make(viewport: ViewportSize = WIDE) -> BrowserContext:
        context = browser_session.browser.new_context(base_url=live_server.url, viewport=viewport)
        contexts.append(context)
        return context

    try:
        yield make
        for context in contexts:
            context.close()
    finally:
        # While the loop is marked running, asgiref keeps this thread's database
        # connections in a separate, async-context slot: close those before unmarking it,
        # or they outlive the test (and block dropping the PostgreSQL test database).
        connections.close_all()
        asyncio._set_running_loop(None)


@pytest.fixture
def browser_context(new_context: Callable[..., BrowserContext]) -> BrowserContext:
    return new_context()


def open_page(context: BrowserContext, path: str | None = None) -> Page:
    page = context.new_page()
    page.set_default_timeout(10_000)
    if path is not None:
        page.goto(path)
        page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    return page


def sign_in(context: BrowserContext, live_server: Any, user: Any) -> None:
    """Give the context a signed-in session cookie, as the sign-in form would."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}]
    )


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def assert_within_width(locator: Any, width: int) -> None:
    """`locator` is laid out inside a page `width` pixels wide, not past its right edge
    (where a table's scroller would hide it)."""
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= width, f"it ends at {box['x'] + box['width']:.0f} px"
