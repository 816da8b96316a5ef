"""Blame of the memory document after one more Save, against reading that memory.

A 4 KiB memory (64 lines) is saved 200 times, each Save changing one line; then, 100 times,
one more Save and both timed reads of it, interleaved:

- figure: `memory.provenance.memory_blame` at the new version N, with N-1's origins cached
  (as they are once the frame has shown the blame before): it reads N-1's cached runs, opens
  N-1 and N, diffs them, caches N, and loads the origin revisions, the capture links and the
  reviews (a bounded number of queries, whatever the length of the history).
- baseline: `memory.selectors.memory_current_get`, what `GET .../memory` does: one query and
  one decryption. The frame makes both requests, so the ratio says how many reads a blame
  costs.

The notes add what the cache saves: a cold blame of the same history opens every revision,
while the warm one opens two.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import figures
from figures import p90

from memory.provenance import Blame, memory_blame
from memory.selectors import MemoryText, memory_current_get
from memory.services import memory_save
from workspaces.models import Org, Team, User
from workspaces.services import workspace_create

NAME = "memory_blame_after_a_save_vs_memory_read"
DOCUMENT_BYTES = 4096
HISTORY = 200
MEASURED = 100
# A blame after a Save may cost up to about four reads of memory.
TARGET = 0.25


def _document(version: int) -> str:
    lines = figures.memory_document(size_bytes=DOCUMENT_BYTES, note="blame").splitlines(True)
    index = version % len(lines)
    lines[index] = f"- Note {index:03d}: changed at {version} ".ljust(63, ".")[:63] + "\n"
    return "".join(lines)


def run() -> list[dict[str, Any]]:
    owner = User.objects.create_user(username="bench-blame", password="bench-password-unused")
    team = Team.objects.create(org=Org.objects.create(name="bench blame"), name="bench blame")
    workspace = workspace_create(team=team, name="bench blame", admin=owner, ai_enabled=False)
    for base in range(HISTORY):
        memory_save(workspace=workspace, author=owner, base_version=base, content=_document(base))

    begun = time.perf_counter()
    cold = memory_blame(workspace=workspace)
    cold_ms = (time.perf_counter() - begun) * 1000
    figure_ms: list[float] = []
    baseline_ms: list[float] = []
    version = HISTORY
    for round_ in range(MEASURED):
        memory_save(
            workspace=workspace, author=owner, base_version=version, content=_document(version)
        )
        version += 1
        sides: list[tuple[Callable[[], Blame | MemoryText], list[float]]] = [
            (lambda: memory_blame(workspace=workspace), figure_ms),
            (lambda: memory_current_get(workspace=workspace), baseline_ms),
        ]
        if round_ % 2:
            sides.reverse()
        answers = []
        for call, samples in sides:
            begun = time.perf_counter_ns()
            answers.append(call())
            samples.append((time.perf_counter_ns() - begun) / 1e6)
        if {answer.version for answer in answers} != {version}:
            raise RuntimeError(f"{NAME}: a side did not answer version {version}")

    figure, baseline = statistics.median(figure_ms), statistics.median(baseline_ms)
    return [
        {
            "name": NAME,
            "unit": "ms (median)",
            "baseline": round(baseline, 3),
            "figure": round(figure, 3),
            "ratio": round(baseline / figure, 3),
            "target": TARGET,
            "meets_target": baseline / figure >= TARGET,
            "notes": (
                f"{DOCUMENT_BYTES}-byte memory of {len(cold.lines)} lines, one line changed per "
                f"Save; blame and read after each of {MEASURED} Saves on a history of "
                f"{HISTORY}+, their order alternating; p90 "
                f"figure {p90(figure_ms):.3f} ms, baseline {p90(baseline_ms):.3f} ms. A cold "
                f"blame of the first {HISTORY} revisions (nothing cached: every revision opened "
                f"and diffed once) took {cold_ms:.1f} ms, "
                f"{cold_ms / figure:.0f}x the warm median."
            ),
        }
    ]
