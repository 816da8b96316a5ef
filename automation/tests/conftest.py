from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, cast

import pytest
from django.core.cache import cache

from automation import runtime
from automation.capture import CaptureReceipt, capture_commit
from automation.models import Admission, Conversation
from automation.providers import ChatMessage, ModelReply, ScriptedProvider, ToolSpec
from automation.services import MemoryState, conversation_create, message_admit
from memory.edits import parse_changes
from memory.services import memory_policy_set, memory_save
from memory.spaces.handle import SpaceHandle, Visibility

# Both memory space stores, as the memory app's tests run them (a fixture, imported to be found).
from memory.tests.conftest import every_store  # noqa: F401
from workspaces.models import Bot, FileVersion, KeySession
from workspaces.services import key_session_open

_keys = itertools.count(1)


def bot_space(bot: Bot) -> SpaceHandle:
    """The space of a bot whose spec is `{"visibility": "bot", "project": "app"}`."""
    return SpaceHandle(
        visibility=Visibility.BOT,
        name="default",
        tenant_id=bot.team_id,
        project="app",
        bot=bot.slug,
    )


@dataclass
class Assistant:
    """One member's conversation in a workspace set to Auto, with an open key session."""

    tenant: Any
    conversation: Conversation
    key_session: KeySession

    def send(
        self,
        text: str = "hello",
        *,
        idempotency_key: str | None = None,
        key_session: KeySession | bool | None = True,
        memory_state: MemoryState | None = None,
    ) -> Admission:
        session = self.key_session if key_session is True else key_session or None
        return message_admit(
            conversation=self.conversation,
            sender=self.tenant.member,
            text=text,
            idempotency_key=idempotency_key or f"send-{next(_keys)}",
            key_session_id=session.pk if session else None,
            memory_state=memory_state,
        ).admission

    def post_message(
        self,
        client: Any,
        *,
        idempotency_key: str,
        text: str = "hello",
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send a message over the API, as the member's browser does: with the key session,
        unless `headers` says otherwise."""
        if headers is None:
            headers = {"HTTP_X_KEY_SESSION": str(self.key_session.pk)}
        return client.post(
            f"/api/v1/agents/assistant/{self.conversation.pk}/messages",
            {"text": text},
            format="json",
            HTTP_IDEMPOTENCY_KEY=idempotency_key,
            **headers,
        )

    def save_memory(self, content: str, *, base_version: int = 1) -> FileVersion:
        """A Save by the member, as the Memory frame makes it."""
        return memory_save(
            workspace=self.tenant.workspace,
            author=self.tenant.member,
            base_version=base_version,
            content=content,
        )

    def capture(
        self,
        admission: Admission,
        changes: list[dict[str, str]] | None = None,
        *,
        expected_version: int = 1,
        key_session_id: uuid.UUID | None = None,
    ) -> CaptureReceipt:
        admission = Admission.objects.select_related("owner", "workspace").get(pk=admission.pk)
        return capture_commit(
            admission=admission,
            owner=admission.owner,
            workspace=admission.workspace,
            key_session_id=key_session_id or self.key_session.pk,
            expected_version=expected_version,
            changes=parse_changes(changes or [{"op": "add", "line": "- likes green tea"}]),
        )


def memory_in_auto(tenant: Any, content: str = "- likes tea\n") -> None:
    """Set the tenant's memory mode to Auto and save `content` as version 1, by the member."""
    memory_policy_set(
        workspace=tenant.workspace, mode="auto", expected_revision=0, actor=tenant.member
    )
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content=content)


@pytest.fixture
def make_assistant(tenant) -> Callable[..., Assistant]:
    def make(*, mode: str = "auto", memory: str | None = "- likes tea\n") -> Assistant:
        if mode != "read_only":
            memory_policy_set(
                workspace=tenant.workspace, mode=mode, expected_revision=0, actor=tenant.member
            )
        if memory is not None:
            memory_save(
                workspace=tenant.workspace, author=tenant.member, base_version=0, content=memory
            )
        return Assistant(
            tenant=tenant,
            conversation=conversation_create(workspace=tenant.workspace, owner=tenant.member),
            key_session=key_session_open(workspace=tenant.workspace, user=tenant.member),
        )

    return make


@pytest.fixture
def assistant(make_assistant) -> Assistant:
    return make_assistant()


@pytest.fixture
def idle_restarts(monkeypatch) -> list[str]:
    """The cache keys whose timeout was restarted (key sessions' idle timers), in order."""
    restarted: list[str] = []
    touch, get_and_touch = cache.touch, cast(Any, cache).get_and_touch

    def touch_spy(key: str, *args: Any, **kwargs: Any) -> bool:
        restarted.append(key)
        return touch(key, *args, **kwargs)

    # A key session's read restarts its timer in the same call, when the entry is there.
    def get_and_touch_spy(key: str, *args: Any, **kwargs: Any) -> Any:
        value = get_and_touch(key, *args, **kwargs)
        if value is not None:
            restarted.append(key)
        return value

    monkeypatch.setattr(cache, "touch", touch_spy)
    monkeypatch.setattr(cache, "get_and_touch", get_and_touch_spy)
    return restarted


class RecordingScriptedProvider(ScriptedProvider):
    """The default scripted model, keeping every call it is given (system and messages)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def complete(
        self, *, system: str, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> ModelReply:
        self.calls.append({"system": system, "messages": [asdict(m) for m in messages]})
        return super().complete(system=system, messages=messages, tools=tools)


@pytest.fixture
def model_calls(monkeypatch) -> list[dict[str, Any]]:
    """Every model call the turns of this test make, in order (the scripted model answers)."""
    provider = RecordingScriptedProvider()
    monkeypatch.setattr(runtime, "provider_from_settings", lambda: provider)
    return provider.calls
