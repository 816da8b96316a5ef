"""Bots' memory specs: the diagnostics table (every code, both severities, clean specs), the
space a spec resolves to (the legacy `scope` included), and the service that saves a bot."""

from __future__ import annotations

import pytest

from memory.bots import (
    Severity,
    auto_memory_parse,
    bot_create,
    bot_spec_set,
    bot_update,
    memory_spec_diagnostics,
    memory_spec_space,
)
from memory.errors import BotSlugTaken, BotSpecInvalid
from memory.spaces.handle import SpaceHandle, Visibility
from workspaces.errors import TeamOwnerRequired
from workspaces.models import AuditEvent, AutoMemorySetting, Bot

CLEAN = {"visibility": "bot", "project": "app", "read": True, "write": False}

# (runtime, memory, auto-memory, the diagnostics as (code, severity, field)), in order.
DIAGNOSTICS = [
    pytest.param("claw", None, None, [], id="no spec"),
    pytest.param("claw", CLEAN, None, [], id="clean bot space"),
    pytest.param("mcp", CLEAN, "on", [], id="clean on mcp with auto-memory"),
    pytest.param(
        "claw",
        {
            "enabled": True,
            "visibility": "project",
            "name": "notes",
            "project": "app",
            "autoload": ["notes/**/*.md", "README.md"],
            "read": True,
            "write": True,
            "pre_compact_inject": True,
        },
        "off",
        [],
        id="clean, every field",
    ),
    pytest.param("claw", {"scope": "notes", "project_root": "/src/app"}, "", [], id="clean legacy"),
    pytest.param("claw", {"enabled": False}, None, [], id="disabled needs no space"),
    pytest.param("claw", {"visibility": "user", "user": 7}, None, [], id="clean user space"),
    pytest.param(
        "claude_code", CLEAN, None, [("C047", "warning", "memory")], id="C047 claude_code"
    ),
    pytest.param("pi", CLEAN, None, [("C047", "warning", "memory")], id="C047 pi"),
    pytest.param("codex", CLEAN, None, [("C047", "warning", "memory")], id="C047 codex"),
    pytest.param("claw", {}, None, [("C048", "error", "visibility")], id="C048 empty spec"),
    pytest.param(
        "claw", {"enabled": True}, None, [("C048", "error", "visibility")], id="C048 enabled"
    ),
    pytest.param(
        "claw",
        {"visibility": "bot"},
        None,
        [("C048", "error", "project")],
        id="C048 bot space without project",
    ),
    pytest.param(
        "claw", {"visibility": "user"}, None, [("C048", "error", "user")], id="C048 no user"
    ),
    pytest.param(
        "claw", {"scope": "notes"}, None, [("C048", "error", "project")], id="C048 bare scope"
    ),
    pytest.param("claw", {**CLEAN, "color": "red"}, None, [("C049", "error", "color")], id="C049"),
    pytest.param(
        "claw", {**CLEAN, "read": "yes"}, None, [("C050", "error", "read")], id="C050 type"
    ),
    pytest.param(
        "claw", {**CLEAN, "user": True}, None, [("C050", "error", "user")], id="C050 bool no int"
    ),
    *(
        pytest.param(
            "claw",
            {"visibility": "user", "user": user},
            None,
            [("C050", "error", "user")],
            id=f"C050 user {user} is no one's id",
        )
        for user in (0, -1, 2**63)
    ),
    pytest.param(
        "claw",
        {**CLEAN, "autoload": ["../secrets/*.md"]},
        None,
        [("C050", "error", "autoload")],
        id="C050 autoload glob",
    ),
    pytest.param(
        "claw",
        {**CLEAN, "project": "a/b"},
        None,
        [("C050", "error", "project")],
        id="C050 project not a segment",
    ),
    pytest.param(
        "claw",
        {"visibility": "org", "project": "app"},
        None,
        [("C050", "error", "project")],
        id="C050 qualifier the visibility does not take",
    ),
    *(
        pytest.param(
            "claw",
            {**spec, "user": 1},
            None,
            [("C050", "error", "user")],
            id=f"C050 user on a {spec.get('visibility', 'legacy scope')} space",
        )
        for spec in (
            {"visibility": "org"},
            {"visibility": "bot", "project": "app"},
            {"scope": "notes", "project": "app"},
        )
    ),
    pytest.param(
        "claw", {"visibility": "team"}, None, [("C170", "error", "visibility")], id="C170"
    ),
    pytest.param(
        "claw",
        {**CLEAN, "project_root": "/src/app"},
        None,
        [("C171", "error", "project_root")],
        id="C171",
    ),
    pytest.param("claw", None, "maybe", [("C131", "error", "auto_memory")], id="C131 word"),
    pytest.param("claw", None, 2, [("C131", "error", "auto_memory")], id="C131 number"),
    pytest.param("claw", None, ["on"], [("C131", "error", "auto_memory")], id="C131 list"),
    pytest.param("kimi", None, "on", [("C132", "warning", "auto_memory")], id="C132 kimi"),
    pytest.param("grok", None, True, [("C132", "warning", "auto_memory")], id="C132 grok"),
    pytest.param("codex", None, "1", [("C132", "warning", "auto_memory")], id="C132 codex"),
    pytest.param("kimi", None, "off", [], id="auto-memory off on kimi is fine"),
    pytest.param(
        "grok",
        {"visibility": "team", "project_root": "/x", "extra": 1},
        "on",
        [
            ("C047", "warning", "memory"),
            ("C049", "error", "extra"),
            ("C170", "error", "visibility"),
            ("C171", "error", "project_root"),
            ("C132", "warning", "auto_memory"),
        ],
        id="several at once, in order",
    ),
]


@pytest.mark.parametrize(("runtime", "memory", "auto_memory", "expected"), DIAGNOSTICS)
def test_the_diagnostics_table(runtime, memory, auto_memory, expected):
    diagnostics = memory_spec_diagnostics(runtime=runtime, memory=memory, auto_memory=auto_memory)

    assert [(d.code, d.severity.value, d.field) for d in diagnostics] == expected
    assert all(d.message for d in diagnostics)


def test_the_table_covers_every_code_and_both_severities():
    expectations: list[list[tuple[str, str, str]]] = [p.values[-1] for p in DIAGNOSTICS]  # type: ignore[misc]
    seen = {(code, severity) for expected in expectations for code, severity, _ in expected}

    assert {code for code, _ in seen} == {
        "C047",
        "C048",
        "C049",
        "C050",
        "C131",
        "C132",
        "C170",
        "C171",
    }
    assert {severity for _, severity in seen} == {s.value for s in Severity}


@pytest.mark.parametrize(
    ("value", "setting"),
    [
        ("on", "on"),
        ("ON ", "on"),
        ("true", "on"),
        ("1", "on"),
        (True, "on"),
        (1, "on"),
        ("off", "off"),
        ("False", "off"),
        ("0", "off"),
        (False, "off"),
        (0, "off"),
        ("", ""),
        ("  ", ""),
        (None, ""),
    ],
)
def test_auto_memory_values_parse_as_the_seed_says(value, setting):
    assert auto_memory_parse(value) == setting


@pytest.mark.parametrize("value", ["yes", "no", "2", 2, -1, 1.0, [], {}])
def test_any_other_auto_memory_value_is_refused(value):
    with pytest.raises(ValueError, match="not an auto-memory value"):
        auto_memory_parse(value)


@pytest.mark.parametrize(
    ("memory", "handle"),
    [
        pytest.param(
            {"scope": "notes", "project_root": "/src/app/"},
            SpaceHandle(Visibility.PROJECT, "notes", 5, project="app"),
            id="legacy scope: the project space keyed on the project root",
        ),
        pytest.param(
            {"scope": "notes", "project": "shop", "project_root": "/src/app"},
            SpaceHandle(Visibility.PROJECT, "notes", 5, project="shop"),
            id="legacy scope with project",
        ),
        pytest.param(
            {"visibility": "bot", "project": "app"},
            SpaceHandle(Visibility.BOT, "default", 5, project="app", bot="helper"),
            id="bot space: the bot's own",
        ),
        pytest.param(
            {"visibility": "org", "name": "handbook"},
            SpaceHandle(Visibility.ORG, "handbook", 5),
            id="org",
        ),
        pytest.param(
            {"visibility": "user", "user": 9},
            SpaceHandle(Visibility.USER, "default", 5, user_id=9),
            id="user: the spec's user",
        ),
        pytest.param(
            {"visibility": "global"}, SpaceHandle(Visibility.GLOBAL, "default", None), id="global"
        ),
        pytest.param({"enabled": False, "visibility": "org"}, None, id="disabled: no space"),
    ],
)
def test_a_valid_spec_resolves_to_its_space(memory, handle):
    assert memory_spec_diagnostics(runtime="claw", memory=memory, auto_memory=None) == []

    assert memory_spec_space(memory, team_id=5, bot_slug="helper") == handle


def test_the_legacy_scope_and_the_structured_spec_name_one_space():
    legacy = memory_spec_space(
        {"scope": "notes", "project_root": "/home/me/app"}, team_id=5, bot_slug="b"
    )
    structured = memory_spec_space(
        {"visibility": "project", "name": "notes", "project": "app"}, team_id=5, bot_slug="b"
    )

    assert legacy is not None
    assert structured is not None
    assert legacy.id == structured.id


def test_a_team_owner_creates_a_bot_with_a_valid_spec(tenant):
    bot = tenant.bot_create("helper", memory=CLEAN, auto_memory="true")

    bot.refresh_from_db()
    assert (bot.team, bot.slug, bot.runtime) == (tenant.team, "helper", "claw")
    assert bot.memory_spec == CLEAN
    assert bot.auto_memory == AutoMemorySetting.ON


def test_a_spec_with_an_error_is_refused_with_its_diagnostics_and_nothing_saved(tenant):
    with pytest.raises(BotSpecInvalid) as refused:
        tenant.bot_create("helper", runtime="kimi", memory={"visibility": "team"})

    assert refused.value.code == "BOT_SPEC_INVALID"
    assert [d["code"] for d in refused.value.detail["diagnostics"]] == ["C047", "C170"]
    assert not Bot.objects.exists()


def test_a_spec_with_only_warnings_is_saved(tenant):
    bot = tenant.bot_create("helper", runtime="codex", memory=CLEAN, auto_memory="on")

    bot.refresh_from_db()
    assert bot.auto_memory == "on"


def test_only_a_team_owner_creates_a_bot(tenant):
    with pytest.raises(TeamOwnerRequired):
        bot_create(team=tenant.team, actor=tenant.member, slug="x", name="x", runtime="claw")

    assert not Bot.objects.exists()


@pytest.mark.parametrize("slug", ["", "a b", "a/b", "..", "é", "validate", "me"])
def test_a_bot_id_is_a_slug_no_route_uses(tenant, slug):
    with pytest.raises(BotSpecInvalid) as refused:
        tenant.bot_create(slug)

    assert refused.value.detail["field"] == "slug"
    assert not Bot.objects.exists()


def test_a_bot_id_is_unique_in_its_team_only(tenant, make_tenant):
    tenant.bot_create("helper")

    with pytest.raises(BotSlugTaken):
        tenant.bot_create("helper")
    make_tenant().bot_create("helper")
    assert Bot.objects.filter(slug="helper").count() == 2


def test_setting_a_spec_is_judged_against_the_bots_runtime(tenant):
    bot = tenant.bot_create("helper", runtime="grok")

    with pytest.raises(BotSpecInvalid):
        bot_spec_set(bot=bot, actor=tenant.admin, memory={"visibility": "bot"}, auto_memory=None)
    bot_spec_set(bot=bot, actor=tenant.admin, memory=CLEAN, auto_memory="off")

    bot.refresh_from_db()
    assert (bot.memory_spec, bot.auto_memory) == (CLEAN, "off")
    with pytest.raises(TeamOwnerRequired):
        bot_spec_set(bot=bot, actor=tenant.member, memory=None, auto_memory=None)


# ---- the audit trail ---------------------------------------------------------------------


def test_creating_a_bot_is_audited_with_its_creator(tenant):
    bot = tenant.bot_create("helper", memory=CLEAN)

    event = AuditEvent.objects.get(action=AuditEvent.Action.BOT_CREATED)

    assert (event.actor, event.target_type, event.target_id) == (tenant.admin, "bot", str(bot.pk))
    assert event.org_id == tenant.team.org_id
    assert event.detail == {"botId": "helper", "teamId": tenant.team.pk, "runtime": "claw"}


def test_changing_a_spec_is_audited_with_the_fields_that_changed_never_their_values(tenant):
    bot = tenant.bot_create("helper")

    bot_spec_set(bot=bot, actor=tenant.admin, memory=CLEAN, auto_memory="on")
    bot_spec_set(bot=bot, actor=tenant.admin, memory=CLEAN, auto_memory="on")  # no change

    event = AuditEvent.objects.get(action=AuditEvent.Action.BOT_SPEC_CHANGED)
    assert event.actor == tenant.admin
    assert event.detail["fields"] == ["memory_spec", "auto_memory"]
    assert "visibility" not in str(event.detail)


def test_a_refused_change_is_not_audited(tenant):
    bot = tenant.bot_create("helper")

    with pytest.raises(BotSpecInvalid):
        bot_update(bot=bot, actor=tenant.admin, name="new", memory={"visibility": "team"})

    assert not AuditEvent.objects.filter(action=AuditEvent.Action.BOT_SPEC_CHANGED).exists()
    bot.refresh_from_db()
    assert bot.name == "helper"


def test_staff_changes_are_audited_with_the_staff_member(tenant, make_tenant):
    staff = make_tenant().admin
    bot = bot_create(
        team=tenant.team, actor=None, staff=staff, slug="helper", name="h", runtime="claw"
    )

    bot_update(bot=bot, actor=None, staff=staff, runtime="mcp")

    events = AuditEvent.objects.filter(target_type="bot").order_by("pk")
    assert [(event.action, event.actor) for event in events] == [
        ("bot_created", staff),
        ("bot_spec_changed", staff),
    ]
    assert events[1].detail["runtime"] == "mcp"
