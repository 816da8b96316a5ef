"""Spellings of the reserved memory namespace, shared by the unit and the route tests.

Each is a way a client (a model, an MCP client, a hand-typed URL) could name
`.zudotext/memory/` or something under it. Most are not canonical document paths, and some
are not valid paths at all: the namespace refusal must come first regardless.
"""

from __future__ import annotations

RESERVED_SPELLINGS: list[str] = [
    # as stored, and the document itself
    ".zudotext/memory/memory.md",
    ".zudotext/memory/notes.md",
    ".zudotext/memory/sub/dir/deep.md",
    # the folder itself, and paths that are not Markdown
    ".zudotext/memory",
    ".zudotext/memory/",
    ".zudotext/memory/x",
    # leading slash, ./ and empty segments
    "/.zudotext/memory/memory.md",
    "./.zudotext/memory/memory.md",
    "./././.zudotext/memory/x.md",
    ".zudotext//memory/memory.md",
    ".zudotext/./memory/memory.md",
    "//.zudotext///memory//memory.md",
    # case
    ".ZUDOTEXT/MEMORY/memory.md",
    ".Zudotext/Memory/x.md",
    ".zudotext/MEMORY/MEMORY.MD",
    # .. hiding or revealing it
    "./.ZUDOTEXT//memory/../memory/x.md",
    "notes/../.zudotext/memory/x.md",
    "../.zudotext/memory/x.md",
    ".zudotext/other/../memory/x.md",
    "a/b/../../.zudotext/memory/x.md",
    ".zudotext/memory\\..\\memory/x.md",
    # backslashes
    ".zudotext\\memory\\memory.md",
    "\\.zudotext\\memory\\x.md",
    # percent-encoding, once, in lower case, twice, three and four times
    "%2Ezudotext%2Fmemory%2Fx.md",
    "%2ezudotext/memory/x.md",
    "%2F.zudotext%5Cmemory%5Cx.md",
    "%252Ezudotext%252Fmemory%252Fx.md",
    "%25252Ezudotext/memory/x.md",
    "%2525252Ezudotext/memory/x.md",
    "%2E%7Audotext/%6Demory/x.md",
    # compatibility forms (NFKC)
    "\uff0ezudotext/memory/x.md",  # full-width dot
    ".\uff5a\uff55\uff44\uff4f\uff54\uff45\uff58\uff54/\uff4d\uff45\uff4d\uff4f\uff52\uff59/x.md",
    "\uff0e\uff3a\uff35\uff24\uff2f\uff34\uff25\uff38\uff34\uff0f\uff2d\uff25\uff2d\uff2f\uff32\uff39\uff0fx.md",
    ".zudotext\uff3cmemory\uff3cx.md",  # full-width backslash
    ".zudotext/\uff4demory/x.md",  # one full-width letter
    "\u2024zudotext/memory/x.md",  # one dot leader
    "%EF%BC%8Ezudotext/memory/x.md",  # a percent-encoded full-width dot
    # invisible characters inside the name
    ".zudo\u200btext/memory/x.md",
    ".zudotext/mem\u00adory/x.md",
    ".zudotext/memory\u200d/x.md",
    ".zudotext/memory/\x00x.md",
    # trailing dots and spaces, which Windows strips
    ".zudotext./memory/x.md",
    ".zudotext/memory /x.md",
]

# Spellings that display as the memory document: an invisible (default-ignorable) character
# inside a segment, or a lookalike (TR39 confusable) for a letter or the separator. The
# unit tests generate them from the whole classes; these are the routes' examples.
INVISIBLE_SPELLINGS: list[str] = [
    ".zudotext/memory\u034f/memory.md",  # combining grapheme joiner
    ".zudotext/memory\ufe0f/memory.md",  # variation selector
    ".zudotext/memory\U000e0100/memory.md",  # variation selector supplement
    ".zudotext/mem\u115fory/memory.md",  # Hangul choseong filler
    ".zudotext/memory%CD%8F/memory.md",  # U+034F percent-encoded
]
LOOKALIKE_SPELLINGS: list[str] = [
    ".zud\u043etext/memory/memory.md",  # Cyrillic o
    ".zudotext\u2215memory\u2215memory.md",  # division slash
    ".zudotext/rnemory/memory.md",  # rn for m
    ".zud0text/\u039cEMORY/memory.md",  # digit zero, Greek capital mu
    ".zudotext/memor\u03a5/memory.md",  # Greek capital upsilon
]
RESERVED_SPELLINGS += INVISIBLE_SPELLINGS + LOOKALIKE_SPELLINGS

# Close to the namespace, but not in it.
ORDINARY_SPELLINGS: list[str] = [
    ".zudotext/memoryx/a.md",
    ".zudotext/memories/a.md",
    ".zudotext/mémory/a.md",
    "notes/.zudotext/memory/a.md",
    "zudotext/memory/a.md",
    "..zudotext/memory/a.md",
    ".zudotext-memory/a.md",
    ".zudotext/memory.md",
    ".zudotext/notes.md",
    ".zudotext/x/../notes.md",
    "memory/a.md",
    "notes/memory.md",
    "%2Ezudotext/notes.md",
]
