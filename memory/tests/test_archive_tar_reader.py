"""The import's reader of plain tar entries (memory.spaces.archive._plain_entries) against
`tarfile`: for any archive it reads, it reads what `tarfile` reads, entry for entry; every
other archive (links, devices, PAX or GNU headers, a cut or damaged header) it leaves to
`tarfile`, which the hostile-archive corpus (test_space_archive.py) then judges."""

from __future__ import annotations

import io
import tarfile

from hypothesis import given
from hypothesis import strategies as st

from memory.spaces.archive import _plain_entries

NAMES = st.lists(
    st.sampled_from(["docs", "a.md", "..", ".", "", "x" * 60, "caf\u00e9", "b\\c", "C:"]),
    min_size=1,
    max_size=3,
).map("/".join)
KINDS = st.sampled_from(
    [tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE]
)
ENTRIES = st.lists(st.tuples(NAMES, KINDS, st.binary(max_size=1100)), max_size=5)
FORMATS = st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])


def tar_of(entries: list[tuple[str, bytes, bytes]], tar_format: int) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format) as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "target" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            try:
                tar.addfile(info, io.BytesIO(data) if info.size else None)
            except ValueError:
                continue  # a name this format cannot hold
    return raw.getvalue()


def tarfile_read(data: bytes) -> list[tuple[str, bytes, int, bytes]]:
    entries = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        for member in tar:
            extracted = tar.extractfile(member) if member.isreg() else None
            body = extracted.read() if extracted is not None else b""
            entries.append((member.name, member.type, member.size, body))
    return entries


def plain_read(data: bytes) -> list[tuple[str, bytes, int, bytes]] | None:
    plain = _plain_entries(memoryview(data))
    if plain is None:
        return None
    return [
        (member.name, member.type, member.size, read() if member.isreg() else b"")
        for member, read in plain
    ]


@given(entries=ENTRIES, tar_format=FORMATS, cut=st.integers(min_value=0, max_value=4096))
def test_what_the_plain_reader_reads_tarfile_reads_the_same(entries, tar_format, cut):
    data = tar_of(entries, tar_format)
    data = data[: len(data) - cut] if cut % 3 == 0 else data

    plain = plain_read(data)

    if plain is not None:
        assert plain == tarfile_read(data)


@given(
    entries=ENTRIES,
    at=st.integers(min_value=0, max_value=3000),
    byte=st.integers(min_value=0, max_value=255),
)
def test_a_damaged_archive_is_read_as_tarfile_reads_it_or_left_to_it(entries, at, byte):
    data = bytearray(tar_of(entries, tarfile.USTAR_FORMAT))
    if at < len(data):
        data[at] = byte

    plain = plain_read(bytes(data))

    if plain is not None:
        assert plain == tarfile_read(bytes(data))


def test_an_archive_of_plain_entries_is_read_without_tarfile():
    entries = [("manifest.json", tarfile.REGTYPE, b"{}"), ("docs", tarfile.DIRTYPE, b"")]
    entries.append(("docs/a.md", tarfile.REGTYPE, b"# A\n" * 200))

    assert plain_read(tar_of(entries, tarfile.PAX_FORMAT)) == [
        ("manifest.json", tarfile.REGTYPE, 2, b"{}"),
        ("docs", tarfile.DIRTYPE, 0, b""),
        ("docs/a.md", tarfile.REGTYPE, 800, b"# A\n" * 200),
    ]


def test_links_devices_and_extended_headers_are_left_to_tarfile():
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE):
        assert plain_read(tar_of([("docs/a.md", kind, b"")], tarfile.USTAR_FORMAT)) is None
    long_name = [("docs/" + "x/" * 80 + "a.md", tarfile.REGTYPE, b"a")]
    assert plain_read(tar_of(long_name, tarfile.PAX_FORMAT)) is None
    assert plain_read(tar_of(long_name, tarfile.GNU_FORMAT)) is None
