"""The auto-memory mirror (memory/mirror.py): the switch's precedence, the project, and the
round trip hydrate / edit / sync-back / release / sweep, on both stores."""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from conftest import Tenant
from memory.errors import (
    AutoMemorySpaceReserved,
    AutoMemoryValueInvalid,
    MirrorNodeBusy,
    MirrorNotHydrated,
)
from memory.mirror import (
    NODE_MAX_AGE_SECONDS,
    SYNC_BUDGET_CAP_SECONDS,
    HydrateReport,
    Level,
    LocalMirrorSpace,
    SweepReport,
    Switch,
    SyncReport,
    auto_memory_resolve,
    manifest_read,
    mirror_hydrate,
    mirror_node,
    mirror_release,
    mirror_sweep,
    mirror_sync_back,
    node_locked,
    project_root,
    sync_budget_seconds,
)
from memory.spaces.quotas import store_get
from memory.spaces.selectors import space_document_read
from memory.spaces.services import SpaceWriter, space_document_delete, space_document_write
from memory.tests.secret_corpus import CREDENTIALS
from memory.tests.spaces.conftest import store_write
from workspaces.models import Bot

NODE = "node-0001"
OTHER_NODE = "node-0002"

# The switch: (flag, bot, team, environment) and the verdict with the level that decided.
PRECEDENCE = [
    (None, "", "", "", Switch(False, Level.DEFAULT)),
    ("on", "off", "off", "off", Switch(True, Level.FLAG)),
    ("off", "on", "on", "on", Switch(False, Level.FLAG)),
    ("", "on", "off", "off", Switch(True, Level.BOT)),
    (None, "off", "on", "on", Switch(False, Level.BOT)),
    (None, "", "on", "off", Switch(True, Level.TEAM)),
    ("  ", "", "off", "on", Switch(False, Level.TEAM)),
    (None, "", "", "true", Switch(True, Level.ENVIRONMENT)),
    (None, "", "", "0", Switch(False, Level.ENVIRONMENT)),
    ("TRUE", "", "", "", Switch(True, Level.FLAG)),
    ("1", "", "", "", Switch(True, Level.FLAG)),
    ("false", "on", "", "", Switch(False, Level.FLAG)),
    (True, "", "", "", Switch(True, Level.FLAG)),
    (None, "", "", None, Switch(False, Level.DEFAULT)),
]


@pytest.mark.parametrize(("flag", "bot", "team", "environment", "expected"), PRECEDENCE)
def test_the_switch_resolves_by_precedence_and_names_the_level(
    flag: Any, bot: str, team: str, environment: Any, expected: Switch
):
    assert auto_memory_resolve(flag=flag, bot=bot, team=team, environment=environment) == expected


@pytest.mark.parametrize(
    ("flag", "environment", "level"),
    [
        ("yes", "", "flag"),
        ("enabled", "on", "flag"),
        (None, "maybe", "environment"),
        (2, "", "flag"),
    ],
)
def test_an_invalid_switch_value_is_c131_naming_its_level(flag, environment, level):
    with pytest.raises(AutoMemoryValueInvalid) as refused:
        auto_memory_resolve(flag=flag, bot="", team="", environment=environment)

    assert refused.value.detail == {"level": level, "diagnostic": "C131"}


def test_a_decided_level_hides_an_invalid_value_below_it():
    switch = auto_memory_resolve(flag="on", bot="", team="", environment="maybe")

    assert switch == Switch(True, Level.FLAG)


def test_the_project_is_the_git_root_shared_by_every_worktree(tmp_path):
    main = tmp_path / "repo"
    (main / ".git" / "worktrees" / "feature").mkdir(parents=True)
    (main / "src" / "deep").mkdir(parents=True)
    (main / ".git" / "worktrees" / "feature" / "commondir").write_text("../..\n")
    worktree = tmp_path / "elsewhere" / "feature"
    (worktree / "lib").mkdir(parents=True)
    (worktree / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'feature'}\n")
    submodule = main / "vendor" / "sub"
    (main / ".git" / "modules" / "sub").mkdir(parents=True)
    submodule.mkdir(parents=True)
    (submodule / ".git").write_text("gitdir: ../../.git/modules/sub\n")

    assert project_root(main / "src" / "deep") == main
    assert project_root(worktree / "lib") == main
    assert project_root(submodule) == submodule
    assert project_root(tmp_path / "elsewhere") is None


# The round trip, on both stores


@pytest.fixture
def bot(tenant: Tenant, every_store: str) -> Bot:
    return tenant.bot_create("scribe", auto_memory="on")


@pytest.fixture
def space(bot: Bot) -> LocalMirrorSpace:
    return LocalMirrorSpace(bot=bot, project="repo")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _seed(space: LocalMirrorSpace, files: dict[str, str]) -> None:
    for path, text in files.items():
        space.write(path, text.encode(), expected_revision=0)


def _bodies(space: LocalMirrorSpace) -> dict[str, str]:
    return {each.path: each.body.decode() for each in space.documents() if each.body is not None}


def _revisions(space: LocalMirrorSpace) -> dict[str, int]:
    return {each.path: each.revision for each in space.documents()}


def test_hydrate_materialises_the_space_with_private_files_and_a_manifest(space, state):
    _seed(space, {"notes.md": "# Notes\n", "topics/db.md": "# DB\n"})

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)

    directory = report.directory
    assert report.written == ["notes.md", "topics/db.md"]
    assert (directory / "topics" / "db.md").read_text() == "# DB\n"
    assert stat.S_IMODE((directory / "notes.md").stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "topics").stat().st_mode) == 0o700
    assert directory.name == NODE
    assert directory.parent.parent == state / "auto-memory"
    node = mirror_node(state_dir=state, space_id=space.space_id, name=NODE)
    assert node.lock.parent == directory.parent
    assert node.lock.exists()
    assert set(manifest_read(node) or {}) == {"notes.md", "topics/db.md"}
    assert sorted(os.listdir(directory)) == ["notes.md", "topics"]


def test_hydrate_of_an_empty_space_makes_the_directory(space, state):
    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)

    assert report.directory.is_dir()
    assert list(report.directory.iterdir()) == []


def test_hydrate_reports_a_document_the_runtimes_own_entries_block(space, state):
    _seed(space, {"a.md": "a\n", "b.md": "b\n", "c/d.md": "d\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "a.md").unlink()
    (directory / "a.md").mkdir()
    (directory / "c" / "d.md").unlink()
    (directory / "c").rmdir()
    (directory / "c").symlink_to(state)

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    synced = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [each["path"] for each in report.errors] == ["a.md", "c/d.md"]
    assert report.written == ["b.md"]
    assert synced.deleted == []
    assert set(_bodies(space)) == {"a.md", "b.md", "c/d.md"}


def test_hydrate_reads_the_space_in_one_bulk_call(space, state, monkeypatch):
    _seed(space, {"a.md": "a\n", "b.md": "b\n", "c.md": "c\n"})
    store_class = type(store_get())
    calls = {"read_all": 0}
    monkeypatch.setattr(store_class, "read_all", _counting(store_class.read_all, calls, "read_all"))

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)

    assert calls == {"read_all": 1}
    assert report.written == ["a.md", "b.md", "c.md"]


def _counting(method: Any, calls: dict[str, int], name: str) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return method(*args, **kwargs)

    return counted


def test_round_trip_of_edit_add_and_delete(space, state):
    _seed(space, {"keep.md": "keep\n", "edit.md": "old\n", "drop.md": "drop\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory

    (directory / "edit.md").write_text("new\n")
    (directory / "topics").mkdir()
    (directory / "topics" / "added.md").write_text("added\n")
    (directory / "drop.md").unlink()
    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.written == ["edit.md", "topics/added.md"]
    assert report.deleted == ["drop.md"]
    assert report.errors == []
    assert report.unchanged == 1
    assert _bodies(space) == {"keep.md": "keep\n", "edit.md": "new\n", "topics/added.md": "added\n"}
    meta = space_document_read(handle=space.handle, path="topics/added.md").meta
    assert meta.updated_by == "mirror:scribe"


def test_a_fresh_directory_sees_the_previous_runs_notes(space, state):
    first = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (first / "learned.md").write_text("# Learned\nuse uv\n")
    mirror_sync_back(space=space, state_dir=state, node_name=NODE)
    mirror_release(state_dir=state, space_id=space.space_id, node_name=NODE)

    second = mirror_hydrate(space=space, state_dir=state, node_name=OTHER_NODE).directory

    assert second != first
    assert not first.exists()
    assert (second / "learned.md").read_text() == "# Learned\nuse uv\n"


def test_an_untouched_mirror_writes_nothing(space, state, monkeypatch):
    _seed(space, {"a.md": "a\n", "b/c.md": "c\n"})
    mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    before = _revisions(space)
    writes: list[str] = []
    monkeypatch.setattr(type(store_get()), "write", lambda *args, **kwargs: writes.append("w"))
    monkeypatch.setattr(type(store_get()), "delete", lambda *args, **kwargs: writes.append("d"))

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert writes == []
    assert report.written == []
    assert report.deleted == []
    assert report.unchanged == 2
    monkeypatch.undo()
    assert _revisions(space) == before


def test_a_second_sync_back_of_the_same_edit_writes_nothing(space, state):
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "a.md").write_text("a\n")
    mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    again = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert again.written == []
    assert again.unchanged == 1
    assert _revisions(space) == {"a.md": 1}


def test_a_secret_file_is_reported_and_not_stored_while_the_clean_one_is(space, state):
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "keys.md").write_text(f"# keys\n{CREDENTIALS[0].line}\n")
    (directory / "clean.md").write_text("# clean\n")

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("keys.md", "SECRET_DETECTED")
    ]
    assert CREDENTIALS[0].line not in str(report.as_json())
    assert _bodies(space) == {"clean.md": "# clean\n"}


def test_symlinks_other_files_and_non_markdown_are_skipped_and_reported(space, state, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("# outside\n")
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "link.md").symlink_to(outside)
    (directory / "dirlink").symlink_to(tmp_path)
    os.mkfifo(directory / "pipe.md")
    (directory / "notes.txt").write_text("plain\n")
    (directory / "real.md").write_text("# real\n")

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert sorted((each["path"], each["reason"]) for each in report.skipped) == [
        ("dirlink", "symlink"),
        ("link.md", "symlink"),
        ("notes.txt", "not_markdown"),
        ("pipe.md", "not_regular"),
    ]
    assert _bodies(space) == {"real.md": "# real\n"}


def test_a_file_over_the_ceiling_is_reported_not_stored(space, state, settings):
    settings.MEMORY_RECALL_MAX_BYTES = 8
    settings.MEMORY_MAX_DOCUMENT_BYTES = 16
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "big.md").write_text("x" * 17)
    (directory / "small.md").write_text("x" * 16)

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("big.md", "DOCUMENT_TOO_LARGE")
    ]
    assert list(_bodies(space)) == ["small.md"]


def test_one_quota_refused_file_does_not_stop_the_rest(space, state, settings):
    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "bot": 100}
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "a-huge.md").write_text("h" * 150)
    (directory / "b.md").write_text("b\n")
    (directory / "c.md").write_text("c\n")

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("a-huge.md", "SPACE_QUOTA_EXCEEDED")
    ]
    assert report.written == ["b.md", "c.md"]
    assert set(_bodies(space)) == {"b.md", "c.md"}


def test_sync_back_before_hydrate_is_an_error_and_writes_nothing(space, state):
    with pytest.raises(MirrorNotHydrated):
        mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert _bodies(space) == {}


def test_a_document_deleted_between_runs_is_pruned_and_not_resurrected(space, bot, state):
    _seed(space, {"gone.md": "gone\n", "stays.md": "stays\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    space_document_delete(
        handle=space.handle, path="gone.md", expected_revision=1, writer=space.writer
    )
    (directory / "unmanaged.md.bak").write_text("the runtime's own\n")

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    synced = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.pruned == ["gone.md"]
    assert not (directory / "gone.md").exists()
    assert (directory / "unmanaged.md.bak").exists()
    assert synced.written == []
    assert synced.deleted == []
    assert _bodies(space) == {"stays.md": "stays\n"}


def test_an_untouched_copy_of_a_document_deleted_elsewhere_is_not_resurrected(space, state):
    _seed(space, {"gone.md": "gone\n"})
    mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    space_document_delete(
        handle=space.handle, path="gone.md", expected_revision=1, writer=space.writer
    )

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.written == []
    assert _bodies(space) == {}


def test_an_edit_of_a_document_changed_elsewhere_is_a_conflict_not_an_overwrite(space, state):
    _seed(space, {"a.md": "base\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    space.write("a.md", b"theirs\n", expected_revision=1)
    (directory / "a.md").write_text("mine\n")

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("a.md", "VERSION_CONFLICT")
    ]
    assert _bodies(space) == {"a.md": "theirs\n"}


@pytest.mark.parametrize("edit", ["edited", "deleted"])
def test_a_document_deleted_and_created_again_elsewhere_is_not_the_one_hydrated(space, state, edit):
    # Another node deleted the document this one hydrated, and a third created the path
    # again: the revision this node holds must not name the new document.
    _seed(space, {"a.md": "base\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    space_document_delete(
        handle=space.handle, path="a.md", expected_revision=1, writer=space.writer
    )
    space.write("a.md", b"a new note by another node\n", expected_revision=0)
    if edit == "edited":
        (directory / "a.md").write_text("mine, over base\n")
    else:
        (directory / "a.md").unlink()

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("a.md", "VERSION_CONFLICT")
    ]
    assert (report.written, report.deleted) == ([], [])
    assert _bodies(space) == {"a.md": "a new note by another node\n"}


def test_a_vanished_directory_deletes_nothing(space, state):
    _seed(space, {"a.md": "a\n", "b.md": "b\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    for child in directory.iterdir():
        child.unlink()
    directory.rmdir()

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert not report.walk_complete
    assert report.deleted == []
    assert report.errors[0]["code"] == "DIRECTORY_UNREADABLE"
    assert set(_bodies(space)) == {"a.md", "b.md"}


def test_an_unreadable_subdirectory_deletes_nothing_anywhere(space, state, monkeypatch):
    _seed(space, {"a.md": "a\n", "sub/b.md": "b\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "a.md").unlink()
    _unreadable(monkeypatch, "sub", directory=True)

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert not report.walk_complete
    assert report.deleted == []
    assert set(_bodies(space)) == {"a.md", "sub/b.md"}


def test_files_under_a_directory_replaced_by_a_symlink_are_not_deletions(space, state, tmp_path):
    _seed(space, {"topics/a.md": "a\n", "gone.md": "gone\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "topics" / "a.md").unlink()
    (directory / "topics").rmdir()
    (directory / "topics").symlink_to(tmp_path)
    (directory / "gone.md").unlink()

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.deleted == ["gone.md"]
    assert set(_bodies(space)) == {"topics/a.md"}


def test_a_chmod_000_file_is_not_a_deletion(space, state, monkeypatch):
    _seed(space, {"locked.md": "locked\n", "other.md": "other\n"})
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    (directory / "locked.md").chmod(0)
    _unreadable(monkeypatch, "locked.md", directory=False)
    (directory / "other.md").write_text("edited\n")

    report = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(error["path"], error["code"]) for error in report.errors] == [
        ("locked.md", "UNREADABLE")
    ]
    assert report.deleted == []
    assert report.written == ["other.md"]
    assert _bodies(space) == {"locked.md": "locked\n", "other.md": "edited\n"}


def _unreadable(monkeypatch: pytest.MonkeyPatch, name: str, *, directory: bool) -> None:
    """Refuse opening `name` as chmod 000 does for anyone but root (the tests may run as
    root, whom the mode does not stop)."""
    real_open = os.open

    def guarded(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == name and bool(flags & os.O_DIRECTORY) == directory:
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)


def test_a_document_at_a_non_canonical_path_is_skipped_and_never_deleted(space, state):
    store_write(store_get(), space.handle, "old/./legacy.md", b"legacy\n", by="mirror:scribe")
    _seed(space, {"fine.md": "fine\n"})

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    synced = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.skipped == ["old/./legacy.md"]
    assert report.written == ["fine.md"]
    assert synced.deleted == []
    assert set(_bodies(space)) == {"old/./legacy.md", "fine.md"}


def test_a_stored_body_that_is_not_utf8_is_reported_not_written(space, state):
    store_write(store_get(), space.handle, "bad.md", b"caf\xe9\n", by="mirror:scribe")
    _seed(space, {"fine.md": "fine\n"})

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    synced = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert [(each["path"], each["code"]) for each in report.errors] == [
        ("bad.md", "DOCUMENT_UNREADABLE")
    ]
    assert report.written == ["fine.md"]
    assert not (report.directory / "bad.md").exists()
    assert synced.deleted == []


def test_a_copy_hydrated_before_its_body_became_unreadable_is_kept_not_pruned(space, state):
    _seed(space, {"bad.md": "cafe\n"})
    first = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    assert first.written == ["bad.md"]
    store_write(store_get(), space.handle, "bad.md", b"caf\xe9\n", by="mirror:scribe")

    report = mirror_hydrate(space=space, state_dir=state, node_name=NODE)
    synced = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    # The document is still in the space: its last readable copy stays, and is not taken
    # for a local deletion or a local edit either.
    assert report.pruned == []
    assert (report.directory / "bad.md").read_text() == "cafe\n"
    assert (synced.written, synced.deleted) == ([], [])
    assert _revisions(space)["bad.md"] == 2


def test_the_time_budget_grows_with_the_documents_and_has_a_cap():
    assert sync_budget_seconds(0) < sync_budget_seconds(10) < sync_budget_seconds(100)
    assert sync_budget_seconds(10**9) == SYNC_BUDGET_CAP_SECONDS


def test_past_the_time_budget_the_rest_is_reported_and_left_for_the_next_sync(space, state):
    directory = mirror_hydrate(space=space, state_dir=state, node_name=NODE).directory
    for name in ("a.md", "b.md", "c.md"):
        (directory / name).write_text(f"{name}\n")
    ticks = iter([0.0, 0.0, SYNC_BUDGET_CAP_SECONDS + 1, SYNC_BUDGET_CAP_SECONDS + 1])

    report = mirror_sync_back(
        space=space, state_dir=state, node_name=NODE, clock=lambda: next(ticks)
    )
    later = mirror_sync_back(space=space, state_dir=state, node_name=NODE)

    assert report.written == ["a.md"]
    assert [(each["path"], each["code"]) for each in report.errors] == [
        ("b.md", "TIME_BUDGET_EXHAUSTED"),
        ("c.md", "TIME_BUDGET_EXHAUSTED"),
    ]
    assert later.written == ["b.md", "c.md"]
    assert later.unchanged == 1


def test_a_held_node_lock_refuses_a_second_process(space, state):
    node = mirror_node(state_dir=state, space_id=space.space_id, name=NODE)

    with node_locked(node), pytest.raises(MirrorNodeBusy):
        mirror_hydrate(space=space, state_dir=state, node_name=NODE)


def test_release_removes_the_node_and_twice_is_fine(space, state):
    node = mirror_node(state_dir=state, space_id=space.space_id, name=NODE)
    mirror_hydrate(space=space, state_dir=state, node_name=NODE)

    first = mirror_release(state_dir=state, space_id=space.space_id, node_name=NODE)
    second = mirror_release(state_dir=state, space_id=space.space_id, node_name=NODE)

    assert (first, second) == (True, False)
    assert not any(path.exists() for path in (node.directory, node.manifest, node.lock))
    with pytest.raises(MirrorNotHydrated):
        mirror_sync_back(space=space, state_dir=state, node_name=NODE)


def test_sweep_reaps_only_old_unlocked_nodes_and_never_a_decoy(space, state, tmp_path):
    nodes = {}
    for name in ("node-0a0a", "node-0b0b", "node-0c0c"):
        mirror_hydrate(space=space, state_dir=state, node_name=name)
        nodes[name] = mirror_node(state_dir=state, space_id=space.space_id, name=name)
    old = time.time() - NODE_MAX_AGE_SECONDS - 60
    for name in ("node-0a0a", "node-0b0b"):
        for path in (nodes[name].directory, nodes[name].lock):
            os.utime(path, (old, old))
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "keep.md").write_text("keep\n")
    os.utime(victim, (old, old))
    decoy = nodes["node-0a0a"].leaf / "node-dddd"
    decoy.symlink_to(victim)

    with node_locked(nodes["node-0b0b"]):
        # Held since long ago: taking the lock marked the node used, so age it again.
        os.utime(nodes["node-0b0b"].lock, (old, old))
        report = mirror_sweep(state_dir=state)

    assert report.reaped == [str(nodes["node-0a0a"].directory)]
    assert report.busy == [str(nodes["node-0b0b"].directory)]
    assert report.ignored == [str(decoy)]
    assert not nodes["node-0a0a"].directory.exists()
    assert not nodes["node-0a0a"].lock.exists()
    assert nodes["node-0b0b"].directory.is_dir()
    assert nodes["node-0c0c"].directory.is_dir()
    assert (victim / "keep.md").read_text() == "keep\n"
    assert decoy.is_symlink()


def test_a_symlinked_space_directory_is_refused_not_followed(space, state, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node = mirror_node(state_dir=state, space_id=space.space_id, name=NODE)
    node.leaf.rmdir()
    node.leaf.symlink_to(elsewhere)

    with pytest.raises(Exception, match="not safe") as refused:
        mirror_hydrate(space=space, state_dir=state, node_name=NODE)

    assert refused.value.code == "MIRROR_STATE_UNSAFE"  # type: ignore[attr-defined]
    assert list(elsewhere.iterdir()) == []


def test_no_other_writer_may_write_or_delete_the_auto_memory_space(tenant, space):
    person = SpaceWriter.of_user(tenant.admin, tenant_id=tenant.team.pk)
    space.write("a.md", b"a\n", expected_revision=0)

    with pytest.raises(AutoMemorySpaceReserved):
        space_document_write(
            handle=space.handle, path="b.md", body=b"b\n", expected_revision=0, writer=person
        )
    with pytest.raises(AutoMemorySpaceReserved):
        space_document_delete(handle=space.handle, path="a.md", expected_revision=1, writer=person)

    assert _bodies(space) == {"a.md": "a\n"}


def test_an_invalid_auto_memory_environment_stops_start_up(settings):
    settings.AUTO_MEMORY = "sometimes"

    with pytest.raises(ImproperlyConfigured, match="C131"):
        apps.get_app_config("memory").ready()


# The command line, locally


def _mirror(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("memory", "mirror", *args, stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue() + str(error)
    except SystemExit as error:
        return int(error.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_the_command_round_trip_and_its_exit_codes(bot, space, state):
    flags = ["--team", str(bot.team_id), "--bot", "scribe", "--project", "repo"]
    flags += ["--state-dir", str(state)]

    refused = _mirror("sync-back", *flags, "--node", NODE)
    code, out, _ = _mirror("hydrate", *flags, "--node", NODE)
    directory = Path(out.strip())
    (directory / "a.md").write_text("# a\n")
    (directory / "keys.md").write_text(f"{CREDENTIALS[0].line}\n")
    partial = _mirror("sync-back", *flags, "--node", NODE)
    (directory / "keys.md").unlink()
    clean = _mirror("sync-back", *flags, "--node", NODE)
    released = [_mirror("release", *flags, "--node", NODE)[0] for _ in range(2)]
    usage = _mirror("hydrate", *flags, "--auto-memory", "sometimes")
    off = _mirror("hydrate", *flags, "--auto-memory", "off")

    assert refused[0] == 1
    assert "MIRROR_NOT_HYDRATED" in refused[2]
    assert code == 0
    assert directory.name == NODE
    assert partial[0] == 3
    assert "keys.md: SECRET_DETECTED" in partial[2]
    assert clean[0] == 0
    assert "0 written, 0 deleted, 1 unchanged" in clean[1]
    assert released == [0, 0]
    assert usage[0] == 2
    assert "C131" in usage[2]
    assert off[0] == 0
    assert "off (decided by the flag level)" in off[1]
    assert _bodies(space) == {"a.md": "# a\n"}


def test_a_state_dir_that_cannot_be_one_is_a_usage_error_naming_it(bot, tmp_path, monkeypatch):
    """As AUTO_MEMORY_STATE_DIR, which --state-dir overrides: absolute, and its parent a
    directory. A relative one would be a different state per working directory, and a
    missing parent is a typo, not a refusal of the space."""
    monkeypatch.chdir(tmp_path)
    flags = ["--team", str(bot.team_id), "--bot", "scribe", "--project", "repo"]
    (tmp_path / "file").write_text("")

    for state_dir, problem in [
        ("state", "must be an absolute path"),
        (str(tmp_path / "missing" / "state"), f"{tmp_path / 'missing'} is not a directory"),
        (str(tmp_path / "file" / "state"), f"{tmp_path / 'file'} is not a directory"),
        (str(tmp_path / "file"), f"{tmp_path / 'file'} is not a directory"),
    ]:
        # sweep names no space: it takes no space flags.
        for action in (["hydrate", *flags], ["release", "--node", NODE, *flags], ["sweep"]):
            code, _, err = _mirror(*action, "--state-dir", state_dir)

            assert code == 2, (action, state_dir, err)
            assert f"--state-dir {state_dir}: " in err, (action, err)
            assert problem in err, (action, err)
            assert "MIRROR_STATE_UNSAFE" not in err
    assert sorted(each.name for each in tmp_path.iterdir()) == ["file"]


def test_the_command_is_off_when_nothing_turns_it_on(tenant, every_store, state, settings):
    settings.AUTO_MEMORY = ""
    bot = tenant.bot_create("quiet")
    flags = ["--team", str(bot.team_id), "--bot", "quiet", "--project", "repo"]

    code, out, _ = _mirror("hydrate", *flags, "--state-dir", str(state))

    assert code == 0
    assert "decided by the default level" in out
    assert not (state / "auto-memory").exists()


def test_the_command_finds_the_project_from_the_working_directory(bot, state, tmp_path):
    (tmp_path / "myrepo" / "src").mkdir(parents=True)
    (tmp_path / "myrepo" / ".git").mkdir()
    flags = ["--team", str(bot.team_id), "--bot", "scribe", "--state-dir", str(state)]

    code, out, _ = _mirror("hydrate", *flags, "--cwd", str(tmp_path / "myrepo" / "src"), "--json")
    outside = _mirror("hydrate", *flags, "--cwd", str(tmp_path))

    expected = LocalMirrorSpace(bot=bot, project="myrepo")
    assert code == 0
    assert Path(json.loads(out)["directory"]).parent == (
        mirror_node(state_dir=state, space_id=expected.space_id, name=NODE).leaf
    )
    assert outside[0] == 2
    assert "--project" in outside[2]


def test_the_command_refuses_another_teams_bot(tenant, make_tenant, every_store, state):
    make_tenant().bot_create("theirs", auto_memory="on")

    code, _, err = _mirror(
        "hydrate",
        "--team",
        str(tenant.team.pk),
        "--bot",
        "theirs",
        "--project",
        "repo",
        "--state-dir",
        str(state),
    )

    assert code == 1
    assert "NOT_FOUND" in err
    assert not (state / "auto-memory").exists()


def test_a_report_prints_every_field_in_order_under_its_camel_case_name(tmp_path):
    synced = SyncReport(written=["a.md"], unchanged=2, walk_complete=False)
    assert list(synced.as_json().items()) == [
        ("written", ["a.md"]),
        ("deleted", []),
        ("unchanged", 2),
        ("skipped", []),
        ("errors", []),
        ("walkComplete", False),
    ]
    assert HydrateReport(directory=tmp_path).as_json()["directory"] == str(tmp_path)
    assert Switch(enabled=True, level=Level.TEAM).as_json() == {"enabled": True, "level": "team"}
    assert SweepReport(busy=["n1"]).as_json() == {"reaped": [], "busy": ["n1"], "ignored": []}
