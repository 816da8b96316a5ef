"""What several benchmarks build and report the same way: a memory document of an exact
size, interleaved timings of two sides, a p90, and the result of a product-vs-raw
comparison. Not a benchmark itself
(`bench/run.py` runs only `bench_*.py`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

# A service timed against the same statements sent raw should keep at least this share
# of raw's speed: the ORM and the cryptography cost at most about 30%.
SERVICE_VS_RAW_TARGET = 0.7


def memory_document(*, size_bytes: int, note: str) -> str:
    """Exactly `size_bytes` of Markdown: list lines of 64 bytes each (numbered, `note`
    padded with dots), ending with a newline. `size_bytes` is a multiple of 64."""
    lines = []
    for index in range(size_bytes // 64):
        head = f"- Note {index:03d}: {note} "
        lines.append(head.ljust(63, ".")[:63] + "\n")
    text = "".join(lines)
    assert len(text.encode()) == size_bytes
    return text


def interleaved_samples(
    service: Callable[[int], None],
    raw: Callable[[int], None],
    *,
    warmup: int,
    measured: int,
    block: int,
) -> tuple[list[float], list[float]]:
    """The ms each of `measured` calls took per side, after `warmup` untimed calls of each.
    Every call gets its own counter (from 1, never reused); the timed calls run in blocks
    of `block` whose order alternates, so that neither side always follows the other."""
    counter = 1
    for _ in range(warmup):
        service(counter)
        raw(counter)
        counter += 1
    service_ms: list[float] = []
    raw_ms: list[float] = []
    for index in range(measured // block):
        order = [(service, service_ms), (raw, raw_ms)]
        if index % 2:
            order.reverse()
        for call, samples in order:
            for _ in range(block):
                begun = time.perf_counter_ns()
                call(counter)
                samples.append((time.perf_counter_ns() - begun) / 1e6)
                counter += 1
    return service_ms, raw_ms


@contextmanager
def statements_recorded(into: list[tuple[str, list[Any]]]) -> Iterator[None]:
    """Append to `into` the SQL text and parameters of every statement sent meanwhile."""

    def wrapper(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        into.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


def service_vs_raw_result(
    *,
    name: str,
    per: str,
    service_ms: list[float],
    raw_ms: list[float],
    notes: str,
    target: float = SERVICE_VS_RAW_TARGET,
) -> dict[str, Any]:
    """The result of timing the product's service against the same statements sent raw,
    in ms `per` operation: medians, and raw / service as the ratio, which should reach
    `target`."""
    service_median = statistics.median(service_ms)
    raw_median = statistics.median(raw_ms)
    ratio = raw_median / service_median
    notes = f"{notes}; service - raw = {service_median - raw_median:.3f} ms (medians)"
    return {
        "name": name,
        "unit": f"ms per {per} (median)",
        "baseline": round(raw_median, 4),
        "figure": round(service_median, 4),
        "ratio": round(ratio, 4),
        "target": f">= {target}",
        "meets_target": ratio >= target,
        "notes": notes,
    }
