"""apply_memory_changes: the only way an automatic writer may change memory text.

A change is a small, exact edit of one line, so a stale or ambiguous target fails
instead of rewriting unrelated prose:

* add: append a line (optionally under a heading); a line already present is a no-op;
* replace: swap one whole line for another; the target must occur exactly once;
* remove: delete one whole line; the target must occur exactly once.

Lines are compared whole, ignoring a trailing carriage return, so a document saved
with Windows line endings edits the same way and keeps its endings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory.errors import MemoryEditInvalid

MAX_CHANGES = 5
MAX_LINE_BYTES = 500

Op = Literal["add", "replace", "remove"]


@dataclass(frozen=True)
class MemoryChange:
    op: Op
    line: str = ""
    target: str = ""
    heading: str = ""

    def as_dict(self) -> dict[str, str]:
        fields = {"line": self.line, "target": self.target, "heading": self.heading}
        return {"op": self.op, **{k: v for k, v in fields.items() if v}}


def parse_changes(raw: Any) -> list[MemoryChange]:
    """Validate the shape of a list of changes; each failure names the edit it is in."""
    if not isinstance(raw, list) or not raw:
        raise MemoryEditInvalid("changes must be a non-empty list.", reason="not_a_list")
    if len(raw) > MAX_CHANGES:
        raise MemoryEditInvalid(
            f"At most {MAX_CHANGES} changes per capture.", reason="too_many_changes"
        )
    return [_parse_one(index, item) for index, item in enumerate(raw)]


def _parse_one(index: int, item: Any) -> MemoryChange:
    if not isinstance(item, Mapping) or item.get("op") not in ("add", "replace", "remove"):
        raise _invalid(index, "unknown_op", "op must be add, replace or remove.")
    op = item["op"]
    required = {"add": ("line",), "replace": ("target", "line"), "remove": ("target",)}[op]
    allowed = set(required) | {"op"} | ({"heading"} if op == "add" else set())
    if set(item) - allowed:
        raise _invalid(index, "unexpected_field", f"{op} takes only {sorted(allowed)}.")
    values: dict[str, str] = {}
    for name in (*required, *(("heading",) if "heading" in item else ())):
        value = item.get(name)
        if not isinstance(value, str) or not value.strip():
            raise _invalid(index, "empty", f"{name} must be a non-empty string.")
        if "\n" in value or "\r" in value:
            raise _invalid(index, "multi_line", f"{name} must be a single line.")
        if not is_encodable(value):
            raise _invalid(index, "invalid_text", f"{name} is not valid Unicode text.")
        if len(value.encode()) > MAX_LINE_BYTES:
            raise _invalid(index, "too_long", f"{name} is over {MAX_LINE_BYTES} bytes.")
        values[name] = value
    return MemoryChange(op=op, **values)


def apply_memory_changes(text: str, changes: Sequence[MemoryChange]) -> str:
    """Apply each change in order to the result of the previous one; all or nothing."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.split("\n") if text else []
    # A trailing newline leaves an empty last element; keep it out of the line list.
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines.pop()
    bare = [line.removesuffix("\r") for line in lines]
    changed = False
    for index, change in enumerate(changes):
        if change.op == "add":
            changed = _add(lines, bare, change, newline) or changed
            continue
        matches = [i for i, line in enumerate(bare) if line == change.target]
        if len(matches) != 1:
            reason = "no_match" if not matches else "multiple_matches"
            raise _invalid(
                index, reason, f"target must match exactly one line; matched {len(matches)}."
            )
        position = matches[0]
        changed = True
        if change.op == "replace":
            ending = "\r" if lines[position].endswith("\r") else ""
            lines[position] = change.line + ending
            bare[position] = change.line
        else:
            del lines[position]
            del bare[position]
    if not changed:
        return text
    if not lines:
        return ""
    # The text keeps its own final-newline state (an empty text gains one); every other
    # line ends with the document's own newline.
    trailing = ends_with_newline or not text
    ending = newline.removesuffix("\n")
    body = [line.removesuffix("\r") + ending for line in lines]
    if not trailing:
        body[-1] = body[-1].removesuffix(ending) if ending else body[-1]
    return "\n".join(body) + ("\n" if trailing else "")


def unchanged_ends(previous: Sequence[str], current: Sequence[str]) -> tuple[int, int]:
    """How many lines `previous` and `current` start with alike, and how many of the rest
    they end with alike. A line diff sets both aside and compares only what lies between:
    a one-line edit of a long text stays one short comparison, and a line repeated
    elsewhere is never paired with a copy of itself across an unchanged stretch."""
    shorter = min(len(previous), len(current))
    head = 0
    while head < shorter and previous[head] == current[head]:
        head += 1
    tail = 0
    while tail < shorter - head and previous[-1 - tail] == current[-1 - tail]:
        tail += 1
    return head, tail


def is_encodable(text: str) -> bool:
    """False for text holding lone surrogates, which JSON can carry but UTF-8 cannot."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _add(lines: list[str], bare: list[str], change: MemoryChange, newline: str) -> bool:
    """Insert the line; False when it was already present."""
    if change.line in bare:
        return False
    ending = newline.removesuffix("\n")
    if not change.heading:
        position = len(lines)
    elif change.heading in bare:
        start = bare.index(change.heading)
        position = _section_end(bare, start)
    else:
        if bare and bare[-1].strip():
            lines.append(ending)
            bare.append("")
        lines.append(change.heading + ending)
        bare.append(change.heading)
        position = len(lines)
    lines.insert(position, change.line + ending)
    bare.insert(position, change.line)
    return True


def _section_end(bare: list[str], heading_index: int) -> int:
    """Just after the last non-blank line of the heading's section."""
    level = len(bare[heading_index]) - len(bare[heading_index].lstrip("#"))
    end = heading_index + 1
    last_content = heading_index
    while end < len(bare):
        line = bare[end]
        depth = len(line) - len(line.lstrip("#"))
        if depth and depth <= level and line[depth : depth + 1] == " ":
            break
        if line.strip():
            last_content = end
        end += 1
    return last_content + 1


def _invalid(index: int, reason: str, message: str) -> MemoryEditInvalid:
    return MemoryEditInvalid(f"Change {index}: {message}", change=index, reason=reason)
