"""Automatic capture: the fenced commit against raw psycopg, and 16 turns racing on one memory.

1. `capture_fence_commit_service_vs_raw_psycopg`: one automatic capture (an `add` of one
   60-byte line to a 2 KiB memory) through `automation.capture.capture_commit`, versus
   the same SQL statements replayed on a separate raw psycopg connection. The raw side's
   statements are the service's own, captured from one untimed capture (CaptureQueriesContext
   for the sequence, including BEGIN and COMMIT; an execute wrapper for each statement's SQL
   text and parameters). Every parameter of the captured statements is checked against
   what it must mean (the admission, the key session, the revision just inserted, ...);
   the raw side then sends the same SQL text with its own values in those places. It
   skips the ORM, the key-session cache lookup, AES-GCM (it stores random bytes of the
   sealed length) and the text edit. A statement it cannot account for stops the
   benchmark instead of comparing different work.

   Each capture consumes one admission, so every capture is preceded, outside the timed
   region, by a human Save resetting memory to the same 2 KiB text and by a fresh
   `message_admit`. Both sides run interleaved in blocks so machine noise falls on both.

2. `capture_16_concurrent_turns_on_one_workspace`: 16 threads, each with its own database
   connection and conversation on one Auto workspace, loop for 10 s over admit, read
   memory, capture one unique line at the version read. Version conflicts come back as
   proposals and are counted; anything else unexpected is reported by its text. After
   the run every revision is decrypted to check that no committed line was lost, that
   each capture revision is exactly its predecessor plus its line and that versions are
   contiguous. The same loop with one thread, on a fresh workspace, is the baseline.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import figures
import psycopg
from django.db import connection
from django.test.utils import CaptureQueriesContext
from figures import p90

from automation.capture import CaptureReceipt, capture_commit
from automation.errors import CaptureConflict, CaptureRetired
from automation.models import Admission, CommitFence, Conversation
from automation.services import conversation_create, message_admit
from memory.edits import MemoryChange, apply_memory_changes
from memory.models import MEMORY_PATH, MemoryPolicy, Proposal
from memory.selectors import MemoryText, memory_current_get
from memory.services import memory_policy_set, memory_save
from workspaces.errors import DomainError, VersionConflict
from workspaces.models import File, FileVersion, KeySession, Org, Team, User, Workspace
from workspaces.selectors import file_version_plaintext, workspace_data_key
from workspaces.services import (
    key_session_open,
    key_session_resolve,
    workspace_create,
    workspace_membership_ensure,
)

FENCE_NAME = "capture_fence_commit_service_vs_raw_psycopg"
CONCURRENT_NAME = "capture_16_concurrent_turns_on_one_workspace"

# --- 1. one fenced capture: service vs raw psycopg -------------------------------------

MEMORY_BYTES = 2048
LINE_BYTES = 60
# AES-GCM as sealed by workspaces.crypto.seal: 12-byte nonce + 16-byte tag.
SEAL_OVERHEAD_BYTES = 28
WARMUP_CAPTURES = 20
MEASURED_CAPTURES = 200
BLOCK = 20

# --- 2. concurrent turns ---------------------------------------------------------------

WRITERS = 16
RUN_SECONDS = 10.0
# The capture refuses once memory is over the recall bound (8192 bytes); a person's Save
# resets it well before that. Resets are counted apart from captures.
RESET_AT_BYTES = 6000
SEED_MEMORY = "# Team memory\n- Concurrent turns capture here.\n"
JOIN_GRACE_SECONDS = 60.0
# Turns handled per second by 16 writers against one writer; lost updates must be 0.
CONCURRENT_TARGET = 0.8
FENCE_TARGET = 0.8
ERROR_TEXTS_KEPT = 5


def memory_document() -> str:
    return figures.memory_document(
        size_bytes=MEMORY_BYTES, note="the team ships on Thursdays; cite docs/errors.md"
    )


def capture_line(counter: int) -> str:
    """A line of exactly LINE_BYTES, different for every `counter`."""
    line = f"- Capture {counter:07d}: prefers short answers and cited sources"
    line = line.ljust(LINE_BYTES, ".")[:LINE_BYTES]
    assert len(line.encode()) == LINE_BYTES
    return line


@dataclass
class AutoSide:
    """One member's conversation with an open key session, in a workspace set to Auto."""

    workspace: Workspace
    member: User
    conversation: Conversation
    key_session: KeySession
    file_id: int
    version: int
    turns: int = 0


def _user(name: str) -> User:
    # No password: hashing one costs a noticeable fraction of a second per user.
    return User.objects.create_user(username=name, password=None)


def _auto_workspace(*, team: Team, name: str, admin: User, memory: str) -> Workspace:
    workspace = workspace_create(team=team, name=name, admin=admin, ai_enabled=True)
    memory_policy_set(workspace=workspace, mode="auto", expected_revision=0, actor=admin)
    memory_save(workspace=workspace, author=admin, base_version=0, content=memory)
    return workspace


def _side(*, workspace: Workspace, member: User) -> AutoSide:
    workspace_membership_ensure(workspace=workspace, user=member)
    file = File.objects.get(workspace=workspace, path=MEMORY_PATH)
    return AutoSide(
        workspace=workspace,
        member=member,
        conversation=conversation_create(workspace=workspace, owner=member),
        key_session=key_session_open(workspace=workspace, user=member),
        file_id=file.pk,
        version=file.current_version,
    )


def _prepare(*, team: Team, admin: User, label: str) -> AutoSide:
    workspace = _auto_workspace(
        team=team, name=f"bench capture {label}", admin=admin, memory=memory_document()
    )
    return _side(workspace=workspace, member=_user(f"bench-capture-{label}"))


def _reset_and_admit(side: AutoSide) -> Admission:
    """Untimed: a person's Save puts memory back to the same 2 KiB, then a new turn."""
    revision = memory_save(
        workspace=side.workspace,
        author=side.member,
        base_version=side.version,
        content=memory_document(),
    )
    side.version = revision.version
    side.turns += 1
    return _admit(side, turn=side.turns, idempotency_key=f"bench-capture-{side.conversation.pk}")


def _admit(side: AutoSide, *, turn: int, idempotency_key: str) -> Admission:
    """Admit the side's turn number `turn`; `idempotency_key` is made unique per turn."""
    return message_admit(
        conversation=side.conversation,
        sender=side.member,
        text=f"turn {turn}",
        idempotency_key=f"{idempotency_key}-{turn}",
        key_session_id=side.key_session.pk,
        memory_state=None,
    ).admission


def _capture_line(
    side: AutoSide, admission: Admission, *, expected_version: int, line: str
) -> CaptureReceipt:
    """The side's member captures one added `line` in the admitted turn."""
    return capture_commit(
        admission=admission,
        owner=side.member,
        workspace=side.workspace,
        key_session_id=side.key_session.pk,
        expected_version=expected_version,
        changes=[MemoryChange(op="add", line=line)],
    )


def _service_capture(side: AutoSide, admission: Admission, line: str) -> int:
    receipt = _capture_line(side, admission, expected_version=side.version, line=line)
    if receipt.is_replay or receipt.is_unchanged or receipt.version != side.version + 1:
        raise RuntimeError(f"{FENCE_NAME}: unexpected receipt {receipt}")
    if receipt.bytes != MEMORY_BYTES + LINE_BYTES + 1:
        raise RuntimeError(f"{FENCE_NAME}: unexpected size {receipt.bytes}")
    side.version = receipt.version
    return receipt.version


# Each statement of a capture: the step it is, found by the start of its SQL, and what
# each of its parameters means. Order matters only where one prefix starts another.
_STEPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "SELECT a.owner_id = %s",
        "judge",
        (
            "owner",
            "workspace",
            "admitted",
            "judge_now",
            "auto",
            "auto",
            "judge_now",
            "key_session",
            "admission",
        ),
    ),
    ("SELECT s.revoked_at IS NOT NULL", "key", ("key_session", "workspace", "owner")),
    ("SELECT v.file_id, v.version", "read", ("workspace", "memory_path")),
    (
        'SELECT (SELECT 1 FROM "memory_memorypolicy"',
        "locks",
        ("workspace", "workspace", "conversation", "key_session", "admission"),
    ),
    ("RELEASE SAVEPOINT", "release", ()),
    ("SAVEPOINT", "savepoint", ()),
    (
        # The version bump, the revision's insert and the org's quota, read with its row
        # held against a quota being set, one statement on PostgreSQL; with no quota (as
        # here) the team's usage is not kept, so no UPDATE of it follows. The file's id and
        # the replaced revision's size come from the memory read.
        "WITH bumped AS",
        "write",
        (
            "write_now",
            "file_id",
            "memory_path",
            "base_version",
            "team",
            "org_active",
            "file_id",
            "version",
            "ciphertext",
            "ciphertext_sha256",
            "size_bytes",
            "owner",
            "automatic",
            "capture",
            "write_now",
            "team",
        ),
    ),
    (
        # The fence row and the admission's commit, one statement on PostgreSQL.
        'WITH fence AS ( INSERT INTO "automation_commitfence"',
        "fence",
        (
            "revision_id",
            "key_session",
            "owner",
            "workspace",
            "now",
            "true",
            "now",
            "key_session",
            "key_session",
            "now",
            "admission",
            "committed",
            "now",
            "revision_id",
            "capture_digest",
        ),
    ),
)
_ONCE = (
    "judge",
    "key",
    "read",
    "begin",
    "locks",
    "write",
    "fence",
    "commit",
)


@dataclass(frozen=True)
class Statement:
    step: str
    sql: str
    roles: tuple[str, ...]


def _bytes(value: Any) -> bytes | None:
    value = getattr(value, "obj", value)  # psycopg's Binary wrapper
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return None


def _role_problem(role: str, value: Any, known: dict[str, Any]) -> str | None:
    """Why `value` cannot be the `role` of the service's capture, or None if it is."""
    if role == "judge_now":
        return None if isinstance(value, datetime) else "not a datetime"
    if role in ("now", "write_now"):
        if not isinstance(value, datetime):
            return "not a datetime"
        first = known.setdefault(role, value)
        return None if first == value else f"differs from the other {role!r} {first}"
    if role == "ciphertext":
        sealed = _bytes(value)
        expected = MEMORY_BYTES + LINE_BYTES + 1 + SEAL_OVERHEAD_BYTES
        if sealed is None or len(sealed) != expected:
            return f"not {expected} bytes"
        known["ciphertext_sha256"] = hashlib.sha256(sealed).hexdigest()
        return None
    if role == "capture_digest":
        ok = isinstance(value, str) and len(value) == 64
        return None if ok else "not a SHA-256 hex digest"
    if role not in known:
        return "no expected value"
    expected = known[role]
    if type(expected) is bool and type(value) is not bool:
        return f"{value!r} is not the boolean {expected!r}"
    return None if value == expected else f"{value!r} != {expected!r}"


def capture_plan(side: AutoSide) -> list[Statement]:
    """Capture one untimed service capture and turn its statements into the raw plan."""
    admission = _reset_and_admit(side)
    base_version = side.version
    line = capture_line(0)
    recorded: list[tuple[str, list[Any]]] = []
    with CaptureQueriesContext(connection) as captured, figures.statements_recorded(recorded):
        version = _service_capture(side, admission, line)
    revision = FileVersion.objects.get(file_id=side.file_id, version=version)
    known: dict[str, Any] = {
        "key_session": side.key_session.pk,
        "owner": side.member.pk,
        "workspace": side.workspace.pk,
        "conversation": side.conversation.pk,
        "admission": admission.pk,
        "memory_path": MEMORY_PATH,
        "base_version": base_version,
        "file_id": side.file_id,
        "version": version,
        "size_bytes": MEMORY_BYTES + LINE_BYTES + 1,
        "revision_id": revision.pk,
        "automatic": FileVersion.AuthorKind.AUTOMATIC.value,
        "capture": FileVersion.ChangeKind.CAPTURE.value,
        "committed": Admission.Status.COMMITTED.value,
        "true": True,
        "admitted": Admission.Status.ADMITTED.value,
        "auto": MemoryPolicy.Mode.AUTO.value,
        "team": side.workspace.team_id,
        "org_active": Org.Status.ACTIVE.value,
    }
    plan: list[Statement] = []
    cursor_statements = iter(recorded)
    for query in captured.captured_queries:
        logged = query["sql"].strip()
        if logged in ("BEGIN", "COMMIT"):
            plan.append(Statement(step=logged.lower(), sql=logged, roles=()))
            continue
        sql, params = next(cursor_statements, ("", []))
        text = " ".join(sql.split())
        match = next((item for item in _STEPS if text.startswith(item[0])), None)
        if match is None or logged.split(None, 2)[:2] != text.split(None, 2)[:2]:
            raise RuntimeError(
                f"{FENCE_NAME}: capture_commit issues a statement the raw baseline does not "
                f"mirror; update bench/bench_capture.py: {logged[:300]}"
            )
        _, step, roles = match
        if len(params) != len(roles):
            raise RuntimeError(
                f"{FENCE_NAME}: the {step!r} statement now takes {len(params)} parameters, "
                f"the raw baseline sends {len(roles)}; update bench/bench_capture.py: {text[:300]}"
            )
        for position, (role, value) in enumerate(zip(roles, params, strict=True)):
            problem = _role_problem(role, value, known)
            if problem is not None:
                raise RuntimeError(
                    f"{FENCE_NAME}: parameter {position + 1} of the {step!r} statement is not "
                    f"the {role!r} the raw baseline sends ({problem}): {text[:300]}"
                )
        plan.append(Statement(step=step, sql=sql, roles=roles))
    if next(cursor_statements, None) is not None:
        raise RuntimeError(f"{FENCE_NAME}: the query log and the executed statements disagree")
    _plan_check([statement.step for statement in plan])
    return plan


def _plan_check(steps: list[str]) -> None:
    for step in _ONCE:
        if steps.count(step) != 1:
            raise RuntimeError(f"{FENCE_NAME}: expected one {step!r} statement, got {steps}")
    at = steps.index
    ordered = (
        at("read") < at("begin") < at("locks") < at("write") < at("fence") < at("commit")
        and steps[-1] == "commit"
        and steps.count("savepoint") == steps.count("release")
    )
    if not ordered:
        raise RuntimeError(f"{FENCE_NAME}: unexpected transaction shape {steps}")


class RawCapture:
    """The service's statements on a separate autocommit psycopg connection.

    BEGIN and COMMIT are sent where the service sends them, so the reads before the
    transaction run in autocommit exactly as the service's do."""

    def __init__(self, *, conn: psycopg.Connection[Any], side: AutoSide, plan: list[Statement]):
        self.conn = conn
        self.side = side
        self.plan = plan
        self.static: dict[str, Any] = {
            "key_session": side.key_session.pk,
            "owner": side.member.pk,
            "workspace": side.workspace.pk,
            "conversation": side.conversation.pk,
            "memory_path": MEMORY_PATH,
            "automatic": FileVersion.AuthorKind.AUTOMATIC.value,
            "capture": FileVersion.ChangeKind.CAPTURE.value,
            "committed": Admission.Status.COMMITTED.value,
            "true": True,
            "admitted": Admission.Status.ADMITTED.value,
            "auto": MemoryPolicy.Mode.AUTO.value,
            "team": side.workspace.team_id,
            "org_active": Org.Status.ACTIVE.value,
        }
        self.read_columns: tuple[int, int, int] | None = None

    def capture(self, admission: Admission, line: str) -> int:
        side = self.side
        values = dict(self.static)
        values["admission"] = admission.pk
        values["base_version"] = side.version
        values["now"] = values["judge_now"] = datetime.now(UTC)
        with self.conn.cursor() as cur:
            for statement in self.plan:
                step = statement.step
                if step == "write":
                    ciphertext = os.urandom(values["size_bytes"] + SEAL_OVERHEAD_BYTES)
                    values["ciphertext"] = ciphertext
                    values["ciphertext_sha256"] = hashlib.sha256(ciphertext).hexdigest()
                    values["write_now"] = datetime.now(UTC)
                elif step == "fence":
                    digest = f"{side.version}:{line}".encode()
                    values["capture_digest"] = hashlib.sha256(digest).hexdigest()
                cur.execute(statement.sql, [values[role] for role in statement.roles])
                if step in ("judge", "key"):
                    if cur.fetchone() is None:
                        raise RuntimeError(f"raw side: {step} found no row")
                elif step == "read":
                    row = cur.fetchone()
                    if row is None:
                        raise RuntimeError("raw side: memory missing")
                    file_at, version_at, size_at = self._read_columns(cur)
                    if row[version_at] != side.version:
                        raise RuntimeError(f"raw side: memory is not at {side.version}")
                    values["size_bytes"] = row[size_at] + len(line.encode()) + 1
                    values["file_id"], values["version"] = row[file_at], side.version + 1
                elif step == "write":
                    inserted = cur.fetchone()
                    if inserted is None:
                        raise RuntimeError(f"raw side: version {side.version} is not current")
                    values["revision_id"] = inserted[0]
                elif step == "fence" and cur.rowcount != 1:
                    raise RuntimeError(f"raw side: {step} wrote {cur.rowcount} rows")
        side.version = values["version"]
        return side.version

    def _read_columns(self, cur: psycopg.Cursor[Any]) -> tuple[int, int, int]:
        if self.read_columns is None:
            names = [column.name for column in cur.description or ()]
            self.read_columns = (
                names.index("file_id"),
                names.index("version"),
                names.index("size_bytes"),
            )
        return self.read_columns


def _timed(capture: Callable[[Admission, str], int], side: AutoSide, counter: int) -> float:
    admission = _reset_and_admit(side)
    line = capture_line(counter)
    begun = time.perf_counter_ns()
    capture(admission, line)
    return (time.perf_counter_ns() - begun) / 1e6


def _captures_committed(side: AutoSide) -> int:
    return FileVersion.objects.filter(
        file_id=side.file_id, change_kind=FileVersion.ChangeKind.CAPTURE
    ).count()


def fence_commit_result(*, team: Team, admin: User) -> dict[str, Any]:
    service_side = _prepare(team=team, admin=admin, label="service")
    raw_side = _prepare(team=team, admin=admin, label="raw")
    plan = capture_plan(service_side)

    def service(admission: Admission, line: str) -> int:
        return _service_capture(service_side, admission, line)

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        raw = RawCapture(conn=conn, side=raw_side, plan=plan)
        counter = 1
        for _ in range(WARMUP_CAPTURES):
            _timed(service, service_side, counter)
            _timed(raw.capture, raw_side, counter)
            counter += 1
        service_ms: list[float] = []
        raw_ms: list[float] = []
        for block in range(MEASURED_CAPTURES // BLOCK):
            order = [(service, service_side, service_ms), (raw.capture, raw_side, raw_ms)]
            if block % 2:
                order.reverse()
            for capture, side, samples in order:
                for _ in range(BLOCK):
                    samples.append(_timed(capture, side, counter))
                    counter += 1

    expected = WARMUP_CAPTURES + MEASURED_CAPTURES
    service_count, raw_count = _captures_committed(service_side), _captures_committed(raw_side)
    raw_fences = CommitFence.objects.filter(admission__workspace=raw_side.workspace).count()
    if service_count != expected + 1 or raw_count != expected or raw_fences != expected:
        raise RuntimeError(
            f"{FENCE_NAME}: unexpected capture revisions: service {service_count} "
            f"(expected {expected + 1}), raw {raw_count} and fences {raw_fences} "
            f"(expected {expected})"
        )

    steps = [statement.step for statement in plan]
    notes = (
        f"{MEASURED_CAPTURES} captures per side after {WARMUP_CAPTURES} warm-up, interleaved "
        f"in blocks of {BLOCK}; each adds a {LINE_BYTES}-byte line to {MEMORY_BYTES} bytes; "
        f"p90 service {p90(service_ms):.3f} ms, raw {p90(raw_ms):.3f} ms; both sides issue "
        f"{len(plan)} statements per capture ({' '.join(steps)}); the raw side sends the "
        "service's SQL text with psycopg server-side parameters and skips the ORM, the "
        "key-session cache lookup, AES-GCM open and seal, and the text edit; the reset Save "
        "and message_admit before each capture are not timed"
    )
    return figures.service_vs_raw_result(
        name=FENCE_NAME,
        per="capture",
        service_ms=service_ms,
        raw_ms=raw_ms,
        notes=notes,
        target=FENCE_TARGET,
    )


# --- 2. concurrent turns on one workspace ----------------------------------------------


@dataclass
class WriterOutcome:
    index: int
    attempts: int = 0
    commits: list[tuple[int, str]] = field(default_factory=list)
    conflicts: int = 0
    conflicts_at_cas: int = 0
    retired: Counter[str] = field(default_factory=Counter)
    unchanged: int = 0
    resets: int = 0
    reset_conflicts: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def _describe(error: BaseException) -> str:
    kind = type(error)
    text = f"{kind.__module__}.{kind.__qualname__}: {error}".strip()
    if isinstance(error, DomainError) and error.detail:
        text += f" {error.detail}"
    return text


def _writer_line(index: int, turn: int) -> str:
    return f"- t{index:02d}-{turn:06d}"


def _writer_turn(
    side: AutoSide, outcome: WriterOutcome, data_key: bytes, label: str, turn: int
) -> None:
    """One turn: admit, read memory (a person resets it when long), capture one line."""
    admission = _admit(side, turn=turn, idempotency_key=f"bench-{label}-t{outcome.index:02d}")
    current: MemoryText = memory_current_get(workspace=side.workspace, data_key=data_key)
    while current.bytes > RESET_AT_BYTES:
        try:
            memory_save(
                workspace=side.workspace,
                author=side.member,
                base_version=current.version,
                content=SEED_MEMORY,
            )
            outcome.resets += 1
        except VersionConflict:
            outcome.reset_conflicts += 1
        current = memory_current_get(workspace=side.workspace, data_key=data_key)
    line = _writer_line(outcome.index, turn)
    outcome.attempts += 1
    try:
        receipt = _capture_line(side, admission, expected_version=current.version, line=line)
    except CaptureConflict as conflict:
        outcome.conflicts += 1
        # Raised from the failed compare-and-set inside the fenced transaction (rather
        # than from capture_commit's own re-read of memory before it).
        if isinstance(conflict.__context__, VersionConflict):
            outcome.conflicts_at_cas += 1
        return
    except CaptureRetired as retired:
        outcome.retired[str(retired.detail.get("predicate"))] += 1
        return
    if receipt.is_replay or receipt.is_unchanged:
        outcome.unchanged += 1
        return
    outcome.commits.append((receipt.version, line))


def _writer(side: AutoSide, outcome: WriterOutcome, label: str, start: threading.Barrier) -> None:
    try:
        connection.ensure_connection()
        data_key = key_session_resolve(
            session_id=side.key_session.pk, workspace=side.workspace, user=side.member
        )
        start.wait(timeout=JOIN_GRACE_SECONDS)
        deadline = time.monotonic() + RUN_SECONDS
        turn = 0
        while time.monotonic() < deadline:
            turn += 1
            try:
                _writer_turn(side, outcome, data_key, label, turn)
            except Exception as error:
                outcome.errors[_describe(error)] += 1
    except Exception as error:
        outcome.errors[_describe(error)] += 1
    finally:
        connection.close()


@dataclass
class ConcurrentRun:
    writers: int
    seconds: float
    outcomes: list[WriterOutcome]
    checks: dict[str, Any]

    def total(self, name: str) -> int:
        return sum(getattr(outcome, name) for outcome in self.outcomes)

    @property
    def commits(self) -> int:
        return sum(len(outcome.commits) for outcome in self.outcomes)

    @property
    def handled(self) -> int:
        """Turns whose capture was decided: committed, or kept as a proposal."""
        return self.commits + self.total("conflicts")

    @property
    def retired(self) -> Counter[str]:
        return sum((outcome.retired for outcome in self.outcomes), Counter())

    @property
    def errors(self) -> Counter[str]:
        return sum((outcome.errors for outcome in self.outcomes), Counter())

    @property
    def unexplained(self) -> int:
        return sum(self.errors.values()) + self.total("unchanged")

    @property
    def sound(self) -> bool:
        return self.checks["lost_updates"] == 0 and all(
            self.checks[name]
            for name in (
                "versions_contiguous",
                "revisions_match_receipts",
                "chain_intact",
                "proposals_match_conflicts",
                "fences_match_receipts",
                "resets_match",
            )
        )

    def summary(self) -> str:
        retired = ", ".join(f"{name} {n}" for name, n in sorted(self.retired.items())) or "none"
        errors = "; ".join(
            f"{count}x {text[:300]}" for text, count in self.errors.most_common(ERROR_TEXTS_KEPT)
        )
        unchanged = self.total("unchanged")
        checks = self.checks
        conflicts = self.total("conflicts")
        at_cas = self.total("conflicts_at_cas")
        return (
            f"{self.writers} writer(s), {self.seconds:.2f} s: attempts {self.total('attempts')}, "
            f"commits {self.commits}, conflicts {conflicts} ({at_cas} at the compare-and-set, "
            f"{conflicts - at_cas} on capture_commit's re-read; proposals {checks['proposals']}), "
            f"retired by predicate: {retired}, unexplained errors {self.unexplained}"
            f"{f' [{errors}]' if errors else ''}"
            f"{f' (incl. {unchanged} unchanged receipts)' if unchanged else ''}, "
            f"lost updates {checks['lost_updates']}; checks: versions contiguous "
            f"1..{checks['versions']} {_yes(checks['versions_contiguous'])}, capture "
            f"revisions ({checks['capture_revisions']}) = commits "
            f"{_yes(checks['revisions_match_receipts'])}, "
            f"each capture revision = predecessor + its line {_yes(checks['chain_intact'])}, "
            f"fences = committed admissions = commits {_yes(checks['fences_match_receipts'])}, "
            f"proposals = conflicts {_yes(checks['proposals_match_conflicts'])}; human resets "
            f"{self.total('resets')} (lost reset races {self.total('reset_conflicts')}) "
            f"{_yes(checks['resets_match'])}"
        )


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def concurrent_run(*, team: Team, admin: User, writers: int, label: str) -> ConcurrentRun:
    workspace = _auto_workspace(
        team=team, name=f"bench concurrent {label}", admin=admin, memory=SEED_MEMORY
    )
    sides = [
        _side(workspace=workspace, member=_user(f"bench-{label}-{index:02d}"))
        for index in range(writers)
    ]
    outcomes = [WriterOutcome(index=index) for index in range(writers)]
    start = threading.Barrier(writers + 1)
    threads = [
        threading.Thread(
            target=_writer,
            args=(side, outcome, label, start),
            name=f"bench-{label}-{outcome.index}",
            daemon=True,
        )
        for side, outcome in zip(sides, outcomes, strict=True)
    ]
    for thread in threads:
        thread.start()
    start.wait(timeout=JOIN_GRACE_SECONDS)
    begun = time.monotonic()
    for thread in threads:
        thread.join(timeout=max(0.0, begun + RUN_SECONDS + JOIN_GRACE_SECONDS - time.monotonic()))
    seconds = time.monotonic() - begun
    hung = [thread.name for thread in threads if thread.is_alive()]
    if hung:
        raise RuntimeError(
            f"{CONCURRENT_NAME}: writers still running after {seconds:.0f} s: {hung}"
        )
    run = ConcurrentRun(writers=writers, seconds=seconds, outcomes=outcomes, checks={})
    run.checks = _verify(workspace, run)
    return run


def _verify(workspace: Workspace, run: ConcurrentRun) -> dict[str, Any]:
    """Decrypt every revision and check no committed line was lost or written on a stale base."""
    file = File.objects.get(workspace=workspace, path=MEMORY_PATH)
    revisions = list(FileVersion.objects.filter(file=file).order_by("version"))
    data_key = workspace_data_key(workspace=workspace)
    if data_key is None:
        raise RuntimeError(f"{CONCURRENT_NAME}: workspace has no data key")
    texts = {
        revision.version: file_version_plaintext(
            version=revision, workspace=workspace, data_key=data_key
        )
        for revision in revisions
    }
    receipts = [commit for outcome in run.outcomes for commit in outcome.commits]
    committed = dict(receipts)
    captures = {r.version for r in revisions if r.change_kind == FileVersion.ChangeKind.CAPTURE}
    resets = sorted(
        r.version
        for r in revisions
        if r.change_kind == FileVersion.ChangeKind.SAVE and r.version > 1
    )
    final = file.current_version
    lost = 0
    stale = 0
    for version, line in committed.items():
        if version not in captures:
            lost += 1
            continue
        # The text that should still hold the line: the last one before a person's next
        # reset, or the final text.
        later = [reset for reset in resets if reset > version]
        holder = texts.get(later[0] - 1 if later else final, "")
        if line not in holder.split("\n"):
            lost += 1
        previous = texts.get(version - 1)
        added = [MemoryChange(op="add", line=line)]
        if previous is None or texts[version] != apply_memory_changes(previous, added):
            stale += 1
    proposals = Proposal.objects.filter(
        workspace=workspace, reason=Proposal.Reason.VERSION_CONFLICT
    ).count()
    fences = CommitFence.objects.filter(admission__workspace=workspace).count()
    committed_admissions = Admission.objects.filter(
        workspace=workspace, status=Admission.Status.COMMITTED
    ).count()
    return {
        "versions": final,
        "versions_contiguous": [r.version for r in revisions] == list(range(1, final + 1)),
        "capture_revisions": len(captures),
        "revisions_match_receipts": len(receipts) == len(committed) == len(captures)
        and set(committed) == captures,
        "lost_updates": lost,
        "chain_intact": stale == 0,
        "proposals": proposals,
        "proposals_match_conflicts": proposals == run.total("conflicts"),
        "fences_match_receipts": fences == committed_admissions == len(receipts),
        "resets_match": len(resets) == run.total("resets"),
        "final_bytes": len(texts.get(final, "").encode()),
    }


def concurrent_result(*, team: Team, admin: User) -> dict[str, Any]:
    begun = time.perf_counter()
    many = concurrent_run(team=team, admin=admin, writers=WRITERS, label="many")
    one = concurrent_run(team=team, admin=admin, writers=1, label="one")
    total_seconds = time.perf_counter() - begun
    figure = many.handled / many.seconds
    baseline = one.handled / one.seconds
    ratio = figure / baseline if baseline else 0.0
    ok = ratio >= CONCURRENT_TARGET and all(
        run.sound and run.unexplained == 0 for run in (many, one)
    )
    notes = (
        f"{many.summary()}. Baseline, {one.summary()}. Handled turns per second: "
        f"{WRITERS} writers {figure:.2f} ({many.commits / many.seconds:.2f} commits), one "
        f"writer {baseline:.2f}; difference {1000 / figure - 1000 / baseline:.1f} ms per "
        f"turn. Total run {total_seconds:.1f} s "
        "(setup, both runs and verification). Conflicts are explained: each left a proposal; "
        "lost updates count committed lines missing from the final memory (or, for lines "
        "committed before a person's reset, from the text that reset replaced)"
    )
    return {
        "name": CONCURRENT_NAME,
        "unit": "turns handled per second (commits plus proposals)",
        "baseline": round(baseline, 4),
        "figure": round(figure, 4),
        "ratio": round(ratio, 4),
        "target": f">= {CONCURRENT_TARGET}",
        "meets_target": ok,
        "notes": notes,
    }


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench capture org")
    team = Team.objects.create(org=org, name="bench capture team")
    admin = _user("bench-capture-admin")
    return [fence_commit_result(team=team, admin=admin), concurrent_result(team=team, admin=admin)]
