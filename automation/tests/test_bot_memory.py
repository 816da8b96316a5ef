"""A bot's memory tools and its access gate, on both memory space stores: the space is the
spec's and nobody else's, `read:` and `write:` gate the tools, every call meets the
memory-spaces service's refusals, and a write over a change the bot has not seen is
refused with a message telling the model to read again."""

from __future__ import annotations

from typing import Any

import pytest

from automation.bot_memory import (
    EMPTY_LISTING,
    BotMemoryTool,
    bot_memory_access,
    bot_memory_tools,
    memory_list,
    memory_read,
    memory_write,
)
from automation.errors import (
    BotMemoryDisabled,
    BotMemoryToolDenied,
    BotMemoryUserUnavailable,
    MemoryWriteStale,
)
from automation.models import BotDocumentSeen
from automation.tests.conftest import bot_space
from memory.bots import bot_spec_set
from memory.errors import SecretDetected, SpaceInvalid
from memory.spaces.handle import SpaceHandle
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_delete, space_document_write
from memory.tests.secret_corpus import fake
from workspaces.errors import DocumentTooLarge, InvalidDocumentPath, InvalidText, NotFound
from workspaces.models import Bot, User

pytestmark = pytest.mark.usefixtures("every_store")

BOT_SPACE = {"visibility": "bot", "project": "app"}


def make_bot(tenant: Any, slug: str = "helper", **spec: Any) -> Bot:
    return tenant.bot_create(slug, memory={**BOT_SPACE, **spec})


def person_writes(tenant: Any, handle: SpaceHandle, path: str, text: str, expected: int | None):
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    return space_document_write(
        handle=handle, path=path, body=text.encode(), expected_revision=expected, writer=writer
    )


def test_list_on_an_empty_space_says_empty(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))

    listing = memory_list(access=access)

    assert listing == EMPTY_LISTING == "(empty)"
    assert store_get().list(access.handle) == []


def test_a_write_by_bot_a_lands_in_its_own_space_attributed_to_it(tenant):
    bot = make_bot(tenant, "alpha")
    access = bot_memory_access(issuer=tenant.admin, bot=bot)

    answer = memory_write(access=access, path="notes/plan.md", content="# Plan\n")

    assert answer == "written: notes/plan.md (7 bytes, revision 1)"
    stored = store_get().read(bot_space(bot), "notes/plan.md")
    assert stored is not None
    assert stored.body == b"# Plan\n"
    assert stored.meta.updated_by == "bot:alpha"
    assert memory_list(access=access) == "notes/plan.md"
    assert memory_read(access=access, path="notes/plan.md") == "# Plan\n"


def test_bot_b_cannot_read_bot_a_space(tenant):
    alpha = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant, "alpha"))
    memory_write(access=alpha, path="secret-plan.md", content="alpha only\n")
    beta = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant, "beta"))

    with pytest.raises(NotFound):
        memory_read(access=beta, path="secret-plan.md")

    assert beta.handle != alpha.handle
    assert memory_list(access=beta) == EMPTY_LISTING
    assert store_get().read(beta.handle, "secret-plan.md") is None


@pytest.mark.parametrize(
    "path", ["../escape.md", "notes/../../escape.md", "/etc/passwd.md", "notes\\..\\x.md", "./a.md"]
)
def test_a_traversal_path_is_refused_and_nothing_is_written(tenant, path):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))

    with pytest.raises(InvalidDocumentPath):
        memory_write(access=access, path=path, content="x\n")
    with pytest.raises(InvalidDocumentPath):
        memory_read(access=access, path=path)

    assert store_get().list(access.handle) == []
    assert not BotDocumentSeen.objects.exists()


def test_a_write_over_a_change_the_bot_has_not_seen_is_refused_with_read_again(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    memory_write(access=access, path="plan.md", content="bot v1\n")
    person_writes(tenant, access.handle, "plan.md", "person v2\n", expected=1)

    with pytest.raises(MemoryWriteStale) as stale:
        memory_write(access=access, path="plan.md", content="bot v3\n")

    assert stale.value.status == 409
    assert "memory_read" in stale.value.message
    assert "again" in stale.value.message
    assert stale.value.detail == {"path": "plan.md", "currentRevision": 2}
    document = store_get().read(access.handle, "plan.md")
    assert document is not None
    assert (document.body, document.meta.revision) == (b"person v2\n", 2)
    # Read again, then write: based on what was read, it goes through.
    assert memory_read(access=access, path="plan.md") == "person v2\n"
    assert memory_write(access=access, path="plan.md", content="bot v3\n").endswith(
        "(7 bytes, revision 3)"
    )


def test_a_document_the_bot_never_read_is_not_overwritten(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    person_writes(tenant, access.handle, "theirs.md", "a person's note\n", expected=0)

    with pytest.raises(MemoryWriteStale):
        memory_write(access=access, path="theirs.md", content="mine\n")

    assert memory_list(access=access) == "theirs.md"  # listing is seeing
    assert "revision 2" in memory_write(access=access, path="theirs.md", content="mine\n")


def test_one_run_never_writes_over_a_change_another_run_of_the_bot_made(tenant):
    bot = make_bot(tenant)
    first, second = (
        bot_memory_access(issuer=tenant.admin, bot=bot, run=run) for run in ("run-1", "run-2")
    )
    memory_write(access=first, path="plan.md", content="v1\n")
    assert memory_read(access=second, path="plan.md") == "v1\n"
    assert memory_read(access=first, path="plan.md") == "v1\n"
    memory_write(access=second, path="plan.md", content="second's v2\n")

    # The first run last read v1: its write would lose the second run's change.
    with pytest.raises(MemoryWriteStale) as stale:
        memory_write(access=first, path="plan.md", content="first's v2\n")

    assert stale.value.detail == {"path": "plan.md", "currentRevision": 2}
    document = store_get().read(first.handle, "plan.md")
    assert document is not None
    assert document.body == b"second's v2\n"
    assert memory_read(access=first, path="plan.md") == "second's v2\n"
    assert "revision 3" in memory_write(access=first, path="plan.md", content="first's v3\n")


def test_calls_without_a_run_share_one_view_of_what_the_bot_saw(tenant):
    bot = make_bot(tenant)
    memory_write(
        access=bot_memory_access(issuer=tenant.admin, bot=bot), path="plan.md", content="v1\n"
    )

    assert "revision 2" in memory_write(
        access=bot_memory_access(issuer=tenant.admin, bot=bot), path="plan.md", content="v2\n"
    )
    # A run has seen nothing yet, so it may not write over v2 unread.
    with pytest.raises(MemoryWriteStale):
        memory_write(
            access=bot_memory_access(issuer=tenant.admin, bot=bot, run="r"),
            path="plan.md",
            content="x\n",
        )


def test_a_document_deleted_since_the_bot_read_it_is_stale_until_read_again(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    memory_write(access=access, path="gone.md", content="v1\n")
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_delete(handle=access.handle, path="gone.md", expected_revision=1, writer=writer)

    with pytest.raises(MemoryWriteStale):
        memory_write(access=access, path="gone.md", content="v2\n")
    with pytest.raises(NotFound):
        memory_read(access=access, path="gone.md")

    # Created again, above the revision deleted.
    assert "revision 2" in memory_write(access=access, path="gone.md", content="v2\n")


def test_a_document_deleted_and_created_again_is_not_the_one_the_bot_saw(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    memory_write(access=access, path="plan.md", content="bot v1\n")
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_delete(handle=access.handle, path="plan.md", expected_revision=1, writer=writer)
    # A create starts above the revision deleted, so the bot's revision 1 names no document.
    person_writes(tenant, access.handle, "plan.md", "a person's new note\n", expected=0)

    with pytest.raises(MemoryWriteStale) as stale:
        memory_write(access=access, path="plan.md", content="bot over it\n")

    assert stale.value.detail == {"path": "plan.md", "currentRevision": 2}
    document = store_get().read(access.handle, "plan.md")
    assert document is not None
    assert (document.body, document.meta.revision) == (b"a person's new note\n", 2)
    # Read again, then write: based on what was read, it goes through.
    assert memory_read(access=access, path="plan.md") == "a person's new note\n"
    assert "revision 3" in memory_write(access=access, path="plan.md", content="bot over it\n")


def test_a_listing_forgets_what_is_no_longer_there(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    memory_write(access=access, path="notes/a.md", content="a\n")
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_delete(
        handle=access.handle, path="notes/a.md", expected_revision=1, writer=writer
    )

    assert memory_list(access=access, path="notes") == EMPTY_LISTING

    assert not BotDocumentSeen.objects.filter(path="notes/a.md").exists()
    assert "revision 2" in memory_write(access=access, path="notes/a.md", content="again\n")


def test_a_listing_forgets_only_its_own_directory_in_its_own_case(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    memory_write(access=access, path="Notes/a.md", content="a\n")

    assert memory_list(access=access, path="notes") == EMPTY_LISTING

    assert "revision 2" in memory_write(access=access, path="Notes/a.md", content="b\n")


def test_every_write_meets_the_memory_space_refusals(tenant, settings):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant))
    settings.MEMORY_MAX_DOCUMENT_BYTES = 64

    with pytest.raises(SecretDetected):
        memory_write(access=access, path="keys.md", content=f"GITHUB_TOKEN=ghp_{fake(36)}\n")
    with pytest.raises(DocumentTooLarge):
        memory_write(access=access, path="big.md", content="x" * 65)
    with pytest.raises(InvalidText):
        memory_write(access=access, path="odd.md", content="lone \ud800 surrogate")

    assert store_get().list(access.handle) == []


def test_a_read_only_spec_gives_no_write_tool_and_refuses_a_write(tenant):
    bot = make_bot(tenant, write=False)
    access = bot_memory_access(issuer=tenant.admin, bot=bot)

    assert bot_memory_tools(bot) == (BotMemoryTool.READ, BotMemoryTool.LIST)
    with pytest.raises(BotMemoryToolDenied) as denied:
        memory_write(access=access, path="a.md", content="x\n")

    assert denied.value.detail == {"tool": "memory_write"}
    assert store_get().list(access.handle) == []


def test_a_write_only_spec_may_not_read_or_list(tenant):
    access = bot_memory_access(issuer=tenant.admin, bot=make_bot(tenant, read=False))

    for tool in (memory_read, memory_list):
        with pytest.raises(BotMemoryToolDenied):
            tool(access=access, path="a.md")

    assert bot_memory_tools(access.bot) == (BotMemoryTool.WRITE,)


@pytest.mark.parametrize("spec", [None, {**BOT_SPACE, "enabled": False}])
def test_a_bot_without_enabled_memory_has_no_tools(tenant, spec):
    bot = tenant.bot_create("quiet", memory=spec)

    with pytest.raises(BotMemoryDisabled):
        bot_memory_access(issuer=tenant.admin, bot=bot)

    assert bot_memory_tools(bot) == ()


def test_a_user_space_follows_its_person_out_of_the_team(tenant):
    bot = tenant.bot_create("mine", memory={"visibility": "user", "user": tenant.admin.pk})
    access = bot_memory_access(issuer=tenant.admin, bot=bot)
    memory_write(access=access, path="a.md", content="x\n")
    assert access.handle.user_id == tenant.admin.pk

    User.objects.filter(pk=tenant.admin.pk).update(is_active=False)

    with pytest.raises(BotMemoryUserUnavailable):
        bot_memory_access(issuer=tenant.admin, bot=bot)
    outsider = User.objects.create_user(username="outsider", password="pw-outsider-1")
    bot_spec_set(
        bot=bot, actor=None, memory={"visibility": "user", "user": outsider.pk}, auto_memory=None
    )
    with pytest.raises(BotMemoryUserUnavailable):
        bot_memory_access(issuer=tenant.admin, bot=bot)


def test_a_private_space_is_one_run(tenant):
    bot = tenant.bot_create("runner", memory={"visibility": "private", "user": tenant.admin.pk})

    with pytest.raises(SpaceInvalid):
        bot_memory_access(issuer=tenant.admin, bot=bot)
    first = bot_memory_access(issuer=tenant.admin, bot=bot, run="run-1")
    memory_write(access=first, path="scratch.md", content="x\n")

    assert (
        memory_list(access=bot_memory_access(issuer=tenant.admin, bot=bot, run="run-2"))
        == EMPTY_LISTING
    )
    assert (
        memory_list(access=bot_memory_access(issuer=tenant.admin, bot=bot, run="run-1"))
        == "scratch.md"
    )
