"""Purge of an org with 1,000 workspaces and 200,000 revisions: rows per second, and the
longest time any single lock is held, vs a single-transaction DELETE baseline measured in
the same run.

Two identical orgs are built with set-based SQL (`INSERT ... SELECT generate_series`):
per org one team (with its owner's team membership), 1,000 workspaces, each with an
admin membership, a memory policy and a data key row, one memory file
(`.zudotext/memory/memory.md`) per workspace at version 200, and 200 revisions per file
(304 bytes of ciphertext each, with its real SHA-256). The revisions of both orgs are
inserted interleaved, round by round, as saves over time would leave them. Both orgs are
then marked for deletion through `org_deletion_request` and their grace is backdated.

- product: `automation.purge.org_purge` on org A, which deletes in batches of
  `PURGE_BATCH_ROWS`, each batch in its own transaction. Every transaction it commits is
  timed: each outermost `transaction.atomic` block (entry to after COMMIT, found by
  swapping the module's `transaction` for a timing shim) and each statement it runs in
  autocommit (the claim). A row lock is held at most from its transaction's first
  statement to its commit, so the longest transaction bounds the longest lock hold.
- baseline: org B removed in one transaction with one DELETE per table: for every step
  of `PURGE_PLAN`, children first, the step's whole lookup with no batching
  (`_raw_delete`, one statement each), then the org row. Every row it deletes stays
  locked until its commit, so its lock hold is the whole transaction.

Before measuring, the tables are vacuumed and analyzed and a CHECKPOINT is taken, again
between the two sides, so each starts with clean buffers and fresh statistics.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

from django.apps import apps
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from automation import purge
from automation.purge import PURGE_BATCH_ROWS, PURGE_PLAN, PurgeStep, org_purge
from memory.models import MEMORY_PATH
from workspaces.models import AuditEvent, Org, Team, User
from workspaces.services import org_deletion_request

NAME_RATE = "org_purge_rows_per_second"
NAME_LOCK = "org_purge_longest_lock_ms"
WORKSPACES = 1000
REVISIONS_PER_FILE = 200
# Ciphertext per revision: this many MD5 digests (16 bytes each) = 304 bytes.
CIPHERTEXT_MD5_BLOCKS = 19
# AES-GCM as sealed by workspaces.crypto.seal: 12-byte nonce + 16-byte tag.
SEAL_OVERHEAD_BYTES = 28
TARGET_LOCK_RATIO = 0.05

# The rows one org holds, by the plan's labels; everything else in PURGE_PLAN is empty.
EXPECTED_ROWS: dict[str, int] = {
    "workspaces.FileVersion": WORKSPACES * REVISIONS_PER_FILE,
    "workspaces.File": WORKSPACES,
    "memory.MemoryPolicy": WORKSPACES,
    "workspaces.WorkspaceKey": WORKSPACES,
    "workspaces.WorkspaceMembership": WORKSPACES,
    "workspaces.Workspace": WORKSPACES,
    "workspaces.TeamMembership": 1,
    "workspaces.Team": 1,
}


def _table(label: str) -> str:
    """The table of model `label`: the rows are written by raw SQL, the plan names them by label."""
    return str(apps.get_model(label)._meta.db_table)


def orgs_build(*, names: list[str], owner: User) -> list[int]:
    """Create one populated org per name with set-based SQL; returns their ids."""
    orgs = [Org.objects.create(name=name) for name in names]
    teams = [Team.objects.create(org=org, name="bench purge team") for org in orgs]
    team_ids = [team.pk for team in teams]
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {_table('workspaces.TeamMembership')} "
            "(team_id, user_id, role, created_at) "
            "SELECT t, %s, 'owner', now() FROM unnest(%s::bigint[]) AS t",
            [owner.pk, team_ids],
        )
        cur.execute(
            f"INSERT INTO {_table('workspaces.Workspace')} "
            "(team_id, name, ai_enabled, ai_consent_revision, created_at) "
            "SELECT t, 'workspace ' || lpad(n::text, 4, '0'), false, 0, now() "
            "FROM generate_series(1, %s) AS n CROSS JOIN unnest(%s::bigint[]) AS t "
            "ORDER BY n, t",
            [WORKSPACES, team_ids],
        )
        in_teams = (
            f"FROM {_table('workspaces.Workspace')} WHERE team_id = ANY(%s::bigint[]) ORDER BY id"
        )
        cur.execute(
            f"INSERT INTO {_table('workspaces.WorkspaceMembership')} "
            "(workspace_id, user_id, role, created_at) "
            f"SELECT id, %s, 'admin', now() {in_teams}",
            [owner.pk, team_ids],
        )
        cur.execute(
            f"INSERT INTO {_table('memory.MemoryPolicy')} (workspace_id, mode, policy_revision, "
            "clear_generation, updated_at, updated_by_id) "
            f"SELECT id, 'read_only', 0, 0, now(), NULL {in_teams}",
            [team_ids],
        )
        # A Fernet token's size; nothing unwraps it here.
        cur.execute(
            f"INSERT INTO {_table('workspaces.WorkspaceKey')} "
            "(workspace_id, wrapped_key, wrapping_key_id, created_at, rewrapped_at) "
            "SELECT id, decode(repeat(md5(id::text), 8), 'hex'), "
            f"left(md5('bench'), 16), now(), NULL {in_teams}",
            [team_ids],
        )
        cur.execute(
            f"INSERT INTO {_table('workspaces.File')} "
            "(workspace_id, path, current_version, deleted_at, created_at, updated_at) "
            f"SELECT id, %s, %s, NULL, now(), now() {in_teams}",
            [MEMORY_PATH, REVISIONS_PER_FILE, team_ids],
        )
        # Round by round (version 1 of every file, then version 2 ...), as saves over
        # time interleave; both orgs' revisions share the heap pages. The rounds are the
        # outer loop of the join, so the 400,000 rows need no sort.
        cur.execute(
            f"INSERT INTO {_table('workspaces.FileVersion')} (file_id, version, ciphertext, "
            "ciphertext_sha256, size_bytes, author_kind, change_kind, author_id, created_at) "
            "SELECT f.id, v.n, c.ct, encode(sha256(c.ct), 'hex'), length(c.ct) - %s, "
            "'human', 'save', %s, now() "
            "FROM generate_series(1, %s) AS v(n) "
            f"CROSS JOIN LATERAL (SELECT f.id FROM {_table('workspaces.File')} f "
            f"JOIN {_table('workspaces.Workspace')} w ON w.id = f.workspace_id "
            "WHERE w.team_id = ANY(%s::bigint[]) ORDER BY f.id) AS f "
            "CROSS JOIN LATERAL (SELECT decode(repeat(md5(f.id::text || ':' || v.n::text), "
            "%s), 'hex') AS ct) AS c",
            [
                SEAL_OVERHEAD_BYTES,
                owner.pk,
                REVISIONS_PER_FILE,
                team_ids,
                CIPHERTEXT_MD5_BLOCKS,
            ],
        )
    return [org.pk for org in orgs]


def plan_counts(org_id: int) -> dict[str, int]:
    """Rows of each PURGE_PLAN step that belong to the org, by the plan's own lookups."""
    return {
        step.model._meta.label: step.model._base_manager.filter(**{step.org_path: org_id}).count()
        for step in PURGE_PLAN
    }


def expected_counts() -> dict[str, int]:
    return {step.label: EXPECTED_ROWS.get(step.label, 0) for step in PURGE_PLAN}


def table_totals() -> dict[str, int]:
    """Every row of each plan table, whoever owns it."""
    totals = {step.model._meta.label: step.model._base_manager.count() for step in PURGE_PLAN}
    totals[Org._meta.label] = Org.objects.count()
    return totals


def database_settle() -> bool:
    """Fresh statistics, hint bits and visibility map set, and (if permitted) no dirty
    buffers. Returns whether the CHECKPOINT was taken."""
    with connection.cursor() as cur:
        for table in sorted(
            {_table(step.label) for step in PURGE_PLAN} | {_table(Org._meta.label)}
        ):
            cur.execute(f"VACUUM (ANALYZE) {table}")
    return checkpoint()


def checkpoint() -> bool:
    """Flush dirty buffers, so the next side does not pay for the previous one's writes.
    Needs superuser or pg_checkpoint; without it the benchmark goes on and says so."""
    try:
        with connection.cursor() as cur:
            cur.execute("CHECKPOINT")
    except DatabaseError:
        return False
    return True


FINAL = "final (audit event, org row)"


class TransactionTimer:
    """Stands in for `django.db.transaction` inside automation.purge: times each
    outermost atomic block, from entry to after its COMMIT, labelled with the plan step
    running. As an execute wrapper it also times each statement run in autocommit (its
    own transaction: the claim)."""

    def __init__(self) -> None:
        self.step = "claim"
        self.atomic_ms: list[tuple[str, float]] = []
        self.autocommit_ms: list[float] = []

    @contextmanager
    def atomic(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        outermost = not connection.in_atomic_block
        begun = time.perf_counter_ns()
        try:
            with transaction.atomic(*args, **kwargs):
                yield
        finally:
            if outermost:
                self.atomic_ms.append((self.step, (time.perf_counter_ns() - begun) / 1e6))

    def __getattr__(self, name: str) -> Any:
        return getattr(transaction, name)

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        if connection.in_atomic_block or not connection.get_autocommit():
            return execute(sql, params, many, context)
        begun = time.perf_counter_ns()
        try:
            return execute(sql, params, many, context)
        finally:
            self.autocommit_ms.append((time.perf_counter_ns() - begun) / 1e6)

    def step_labelled(
        self, purge_step: Callable[[PurgeStep, int, list[object]], list[object]]
    ) -> Callable[..., list[object]]:
        """`automation.purge._purge_step`, recording which step each transaction belongs to."""

        def labelled(step: PurgeStep, org_id: int, history: list[object]) -> list[object]:
            self.step = step.model._meta.label
            try:
                return purge_step(step, org_id, history)
            finally:
                self.step = FINAL

        return labelled


def single_transaction_delete(org_id: int) -> tuple[int, float, int]:
    """Delete the org's rows in one transaction, one unbatched DELETE per plan step and
    one for the org. Returns (rows deleted, transaction ms including COMMIT, statements)."""
    deleted = 0
    with CaptureQueriesContext(connection) as captured:
        begun = time.perf_counter_ns()
        with transaction.atomic():
            for step in PURGE_PLAN:
                rows = step.model._base_manager.filter(**{step.org_path: org_id})
                deleted += int(rows._raw_delete("default"))
            deleted += int(Org.objects.filter(pk=org_id)._raw_delete("default"))
        elapsed_ms = (time.perf_counter_ns() - begun) / 1e6
    deletes = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("DELETE")]
    if len(deletes) != len(PURGE_PLAN) + 1:
        raise RuntimeError(
            f"{NAME_RATE}: the baseline should send one DELETE per table, sent {len(deletes)}"
        )
    return deleted, elapsed_ms, len(deletes)


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[-1]


def run() -> list[dict[str, Any]]:
    started = time.perf_counter()
    owner = User.objects.create_user(username="bench-purge", password="bench-password-unused")
    org_a, org_b = orgs_build(names=["bench purge A", "bench purge B"], owner=owner)
    for org_id in (org_a, org_b):
        org_deletion_request(org=Org.objects.get(pk=org_id), actor=owner)
    Org.objects.filter(pk__in=[org_a, org_b]).update(
        deletion_due_at=timezone.now() - timedelta(minutes=1)
    )
    built_s = time.perf_counter() - started

    expected = expected_counts()
    before = {org_id: plan_counts(org_id) for org_id in (org_a, org_b)}
    for org_id, counts in before.items():
        if counts != expected:
            raise RuntimeError(f"{NAME_RATE}: org {org_id} was built as {counts}, not {expected}")
    rows_per_org = sum(expected.values()) + 1  # and the org row itself

    begun = time.perf_counter()
    checkpoints = database_settle()
    settle_s = time.perf_counter() - begun

    # Product: the purge of org A, every transaction it commits timed.
    timer = TransactionTimer()
    totals_before = table_totals()
    with (
        mock.patch.object(purge, "transaction", timer),
        mock.patch.object(purge, "_purge_step", timer.step_labelled(purge._purge_step)),
        connection.execute_wrapper(timer),
    ):
        begun = time.perf_counter()
        purged = org_purge(org_id=org_a)
        purge_s = time.perf_counter() - begun
    if not purged:
        raise RuntimeError(f"{NAME_RATE}: org_purge did not claim org {org_a}")
    audit = AuditEvent.objects.get(action=AuditEvent.Action.ORG_PURGED, org_id=org_a)
    purge_deleted = sum(audit.detail["deletedRows"].values()) + 1
    # The bench's rows have no admin history.
    if audit.detail["deletedRows"] != {**expected, "admin.LogEntry": 0} or (
        purge_deleted != rows_per_org
    ):
        raise RuntimeError(
            f"{NAME_RATE}: the purge reported {audit.detail['deletedRows']}, not {expected}"
        )

    begun = time.perf_counter()
    checkpoints = checkpoint() and checkpoints
    settle_s += time.perf_counter() - begun

    # Baseline: org B in one transaction.
    baseline_deleted, baseline_ms, baseline_statements = single_transaction_delete(org_b)
    if baseline_deleted != rows_per_org:
        raise RuntimeError(
            f"{NAME_RATE}: the baseline deleted {baseline_deleted} rows, not {rows_per_org}"
        )

    # Both orgs are gone, by the plan's lookups and by the tables' own totals.
    left = {org_id: plan_counts(org_id) for org_id in (org_a, org_b)}
    nothing = dict.fromkeys(expected, 0)
    totals_after = table_totals()
    removed = {label: totals_before[label] - totals_after[label] for label in totals_before}
    wanted = {label: 2 * rows for label, rows in expected.items()} | {Org._meta.label: 2}
    if (
        any(counts != nothing for counts in left.values())
        or Org.objects.filter(pk__in=[org_a, org_b]).exists()
        or Team.objects.filter(org_id__in=[org_a, org_b]).exists()
        or removed != wanted
    ):
        raise RuntimeError(
            f"{NAME_RATE}: rows survived: by the plan {left}; rows removed per table "
            f"{removed}, expected {wanted}"
        )

    # The purge's transactions: its claim (autocommit), one per batch, including the empty
    # batch that ends each step that had rows (a step with none opens no transaction), and
    # the final one (audit event and org row).
    holds = [*timer.atomic_ms, *(("claim", ms) for ms in timer.autocommit_ms)]
    holds_ms = [ms for _, ms in holds]
    batches = sum(math.ceil(rows / PURGE_BATCH_ROWS) + 1 for rows in expected.values() if rows)
    if len(timer.atomic_ms) != batches + 1 or timer.atomic_ms[-1][0] != FINAL:
        raise RuntimeError(
            f"{NAME_RATE}: expected {batches} batch transactions and a final one, timed "
            f"{len(timer.atomic_ms)} ending in {timer.atomic_ms[-1][0]!r}"
        )
    longest_step, longest_ms = max(holds, key=lambda hold: hold[1])
    # The revisions' deleting batches, in order: does a batch cost more as the purge goes on?
    revision_ms = [ms for step, ms in timer.atomic_ms if step == "workspaces.FileVersion"][:-1]
    tenth = max(1, len(revision_ms) // 10)
    revision_first = statistics.mean(revision_ms[:tenth])
    revision_last = statistics.mean(revision_ms[-tenth:])

    purge_rate = purge_deleted / purge_s
    baseline_rate = baseline_deleted / (baseline_ms / 1000)
    lock_ratio = longest_ms / baseline_ms
    shape = (
        f"{WORKSPACES} workspaces x {REVISIONS_PER_FILE} revisions "
        f"({CIPHERTEXT_MD5_BLOCKS * 16}-byte ciphertext) per org, {rows_per_org} rows per org "
        f"({expected['workspaces.FileVersion']} revisions; {WORKSPACES} each of files, "
        "memory policies, data keys, workspace memberships and workspaces; 1 team membership, "
        "1 team, 1 org)"
    )
    return [
        {
            "name": NAME_RATE,
            "unit": "rows deleted per second",
            "baseline": round(baseline_rate, 1),
            "figure": round(purge_rate, 1),
            "ratio": round(purge_rate / baseline_rate, 4),
            "target": "report",
            "meets_target": True,
            "notes": (
                f"{shape}; purge: {purge_deleted} rows in {purge_s:.2f} s over "
                f"{len(holds_ms)} transactions of <= {PURGE_BATCH_ROWS} rows; baseline: "
                f"{baseline_deleted} rows in {baseline_ms / 1000:.2f} s in one transaction "
                f"of {baseline_statements} DELETE statements (one per table); setup: both "
                f"orgs built in {built_s:.1f} s, vacuum/analyze/checkpoints {settle_s:.1f} s"
                + ("" if checkpoints else " (CHECKPOINT not permitted: skipped)")
            ),
        },
        {
            "name": NAME_LOCK,
            "unit": "ms, longest transaction (lock hold)",
            "baseline": round(baseline_ms, 3),
            "figure": round(longest_ms, 3),
            "ratio": round(lock_ratio, 4),
            "target": f"<= {TARGET_LOCK_RATIO}",
            "meets_target": lock_ratio <= TARGET_LOCK_RATIO,
            "notes": (
                f"purge: {len(holds_ms)} transactions ({batches} batches over "
                f"{len(PURGE_PLAN)} steps, each step ending with an empty one; the claim in "
                f"autocommit; the final audit-and-org-row one); p50 "
                f"{statistics.median(holds_ms):.1f} ms, p99 {_p99(holds_ms):.1f} ms, max "
                f"{longest_ms:.1f} ms ({longest_step}); the {len(revision_ms)} revision "
                f"batches averaged {revision_first:.1f} ms over the first {tenth} and "
                f"{revision_last:.1f} ms over the last {tenth}; baseline: one transaction of "
                f"{baseline_ms:.1f} ms holding every row lock until COMMIT"
            ),
        },
    ]
