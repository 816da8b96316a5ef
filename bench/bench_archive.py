"""Memory space archives: export and import of a space of 2,000 documents (8 MiB of
Markdown in all) against `tar czf` and `tar xzf` of the same tree, in the same run, on each
store (database, filesystem); and the peak memory of an export.

Export runs `memory.spaces.archive.space_export` into a spooled temporary file, as the
route does: it lists the space, reads (and opens, on the database store) every document,
scans each for credentials, then writes the gzip tar (at gzip level 1). The baseline is GNU
tar compressing the same documents laid out as files (`tar czf`, gzip's default level 6).
Import runs `space_import` of that archive into an empty space: every entry judged,
checksummed, checked by the write path, then one batch write; the baseline is `tar xzf` of
the same archive into an empty directory. The tree, tar's archive and its extractions live
in a tmpfs (/dev/shm when present, else the temporary directory), so tar's figure measures
tar and gzip rather than the disk's write-back; the filesystem store's root is in that same
tmpfs. Throughput is the documents' bytes over the time taken, the median of REPEATS for
both sides; the ratio is ours over tar's. Each store's figures have their own baselines,
measured right beside them.

The peak memory is tracemalloc's peak of Python allocations over one more export (traced
separately, since tracing slows the timed runs): bodies wait in a spooled file that goes to
disk past its size, so it stays bounded whatever the size of the space.
"""

from __future__ import annotations

import io
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.test.utils import override_settings
from figures import memory_document

from memory.spaces.archive import (
    COMPRESS_LEVEL,
    SPOOL_MEMORY_BYTES,
    ImportStrategy,
    space_export,
    space_import,
)
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, WriterKind, space_documents_write_many
from memory.spaces.store import PendingWrite
from workspaces.models import Org, Team, User

DOCUMENTS = 2_000
DOCUMENT_BYTES = 4_224  # 2,000 of them: 8,448,000 bytes, just over 8 MiB
BATCH = 250
REPEATS = 5
TARGET_RATIO = 0.5
STORES = ("database", "filesystem")
_MIB = 1024 * 1024


def path_of(index: int) -> str:
    return f"notes/{index % 20:02d}/note-{index:05d}.md"


def _space_fill(handle: SpaceHandle, writer: SpaceWriter, documents: dict[str, bytes]) -> None:
    paths = sorted(documents)
    for start in range(0, len(paths), BATCH):
        writes = [PendingWrite(path, documents[path], 0) for path in paths[start : start + BATCH]]
        space_documents_write_many(handle=handle, writes=writes, writer=writer)


@dataclass(frozen=True)
class Timing:
    seconds: float  # the median wall-clock time of REPEATS runs
    cpu_seconds: float  # the median CPU time of this process, or of the children (tar, gzip)


def _median(run: Any, *, children: bool = False) -> Timing:
    """The median of REPEATS runs of `run()`. The CPU time is reported beside the wall
    clock because a shared machine's load moves the latter: this process's own (without
    the database server's), or with `children` that of the processes `run` started."""
    timings, cpu = [], []
    for _ in range(REPEATS):
        cpu_started = _cpu(children)
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
        cpu.append(_cpu(children) - cpu_started)
    return Timing(seconds=statistics.median(timings), cpu_seconds=statistics.median(cpu))


def _cpu(children: bool) -> float:
    if not children:
        return time.process_time()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _scratch_dir() -> Path:
    """A fresh directory in memory (tmpfs) when the machine has one: tar then writes its
    2,000 files without waiting on the disk."""
    shm = Path("/dev/shm")
    parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="bench-archive-", dir=parent))


def _result(name: str, total: int, ours_timing: Timing, tar: Timing, notes: str) -> dict[str, Any]:
    ours, theirs = total / _MIB / ours_timing.seconds, total / _MIB / tar.seconds
    ratio = ours / theirs
    notes += (
        f"; CPU seconds (median): ours {ours_timing.cpu_seconds:.3f} (this process only), "
        f"tar's {tar.cpu_seconds:.3f}, ratio {tar.cpu_seconds / ours_timing.cpu_seconds:.2f}"
    )
    return {
        "name": name,
        "unit": f"MB/s of documents (median of {REPEATS})",
        "baseline": round(theirs, 3),
        "figure": round(ours, 3),
        "ratio": round(ratio, 4),
        "target": f">= {TARGET_RATIO}",
        "meets_target": ratio >= TARGET_RATIO,
        "notes": notes,
    }


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench archive org")
    team = Team.objects.create(org=org, name="bench archive team")
    user = User.objects.create_user(username="bench-archive", password="bench-archive-pw")
    writer = SpaceWriter(kind=WriterKind.IMPORT, ident=str(user.pk), tenant_id=team.pk, user=user)
    documents = {
        path_of(index): memory_document(size_bytes=DOCUMENT_BYTES, note=path_of(index)).encode()
        for index in range(DOCUMENTS)
    }
    scratch = _scratch_dir()
    try:
        tree = scratch / "tree"
        for path, body in documents.items():
            (tree / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / "docs" / path).write_bytes(body)
        results = []
        for store in STORES:
            # The filesystem store lives in the same tmpfs as tar's tree and extractions.
            with override_settings(MEMORY_STORE=store, DATA_DIR=scratch / "data"):
                results += _store_run(store, scratch, tree, team, writer, documents)
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _store_run(
    store: str,
    scratch: Path,
    tree: Path,
    team: Team,
    writer: SpaceWriter,
    documents: dict[str, bytes],
) -> list[dict[str, Any]]:
    """Export and import on `store`, each beside its own tar baseline."""
    source = SpaceHandle(visibility=Visibility.ORG, name=f"bench-{store}", tenant_id=team.pk)
    _space_fill(source, writer, documents)
    total = sum(len(body) for body in documents.values())
    archive = io.BytesIO()

    def export_once() -> None:
        nonlocal archive
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
            space_export(handle=source, out=spool)
            spool.seek(0)
            archive = io.BytesIO(spool.read())

    tar_file = scratch / f"tree-{store}.tar.gz"
    export_seconds = _median(export_once)
    tar_seconds = _median(
        lambda: subprocess.run(["tar", "czf", str(tar_file), "-C", str(tree), "docs"], check=True),
        children=True,
    )

    targets = iter(range(REPEATS))

    def import_once() -> None:
        target = SpaceHandle(
            visibility=Visibility.ORG, name=f"copy-{store}-{next(targets)}", tenant_id=team.pk
        )
        report = space_import(
            handle=target,
            archive=io.BytesIO(archive.getvalue()),
            strategy=ImportStrategy.SKIP,
            dry_run=False,
            writer=writer,
        )
        assert report.imported == DOCUMENTS

    import_seconds = _median(import_once)
    archive_file = scratch / f"export-{store}.tar.gz"
    archive_file.write_bytes(archive.getvalue())
    outputs = iter(range(REPEATS))

    def untar_once() -> None:
        out = scratch / f"untar-{store}-{next(outputs)}"
        out.mkdir()
        subprocess.run(["tar", "xzf", str(archive_file), "-C", str(out)], check=True)

    untar_seconds = _median(untar_once, children=True)

    tracemalloc.start()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
        space_export(handle=source, out=spool)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    where = store_get().describe(source).split(":")[0]
    if store == "filesystem":
        where += " (in the tmpfs, beside tar's tree)"
    peak_mib = peak / _MIB
    # Bounded: the bodies' spool and the archive's spool, each at most SPOOL_MEMORY_BYTES in
    # memory, and one document at a time beside them.
    bound_mib = 3 * SPOOL_MEMORY_BYTES / _MIB
    return [
        _result(
            f"space_export_2000_docs_{store}_vs_tar_czf",
            total,
            export_seconds,
            tar_seconds,
            f"{DOCUMENTS} documents, {total:,} bytes, {where} store; archive "
            f"{len(archive.getvalue()):,} bytes (gzip level {COMPRESS_LEVEL}; tar's "
            f"{tar_file.stat().st_size:,} at gzip's default 6); peak Python memory of an "
            f"export {peak_mib:.1f} MiB",
        ),
        _result(
            f"space_import_2000_docs_{store}_vs_tar_xzf",
            total,
            import_seconds,
            untar_seconds,
            f"into an empty space, one batch write, {where} store",
        ),
        {
            "name": f"space_export_2000_docs_{store}_peak_memory",
            "unit": "MiB (tracemalloc peak)",
            "baseline": round(total / _MIB, 3),
            "figure": round(peak_mib, 3),
            "ratio": round(peak_mib / (total / _MIB), 4),
            "target": f"<= {bound_mib:.0f} MiB whatever the space's size",
            "meets_target": peak_mib <= bound_mib,
            "notes": "baseline: the space's documents in MiB; figure: the export's peak",
        },
    ]
