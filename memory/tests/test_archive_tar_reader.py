"""The import's tar reader (memory.spaces.archive._tar_entries) against `tarfile`: for any
archive, whole, cut or damaged, it reads what `tarfile` reads, entry for entry, and fails
where `tarfile` fails. Plain entries it reads itself; from the first other header (links,
devices, PAX or GNU headers, a cut or damaged header) `tarfile` reads, and the
hostile-archive corpus (test_space_archive.py) judges what it reads."""

from __future__ import annotations

import io
import tarfile
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from memory.spaces.archive import _block_sum, _BoundedReader, _tar_entries

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


def wanted(member: tarfile.TarInfo, every: bool) -> bool:
    """Whether a reader asks for this regular file's bytes: every one's, or only those under
    docs/ (as an import leaves the entries it ignores unread)."""
    return member.isreg() and (every or member.name.startswith("docs"))


def tarfile_read(data: bytes, every: bool = True) -> list[tuple[str, bytes, int, bytes]] | str:
    """What `tarfile` reads of `data`, entry by entry, or the name of what it raised (a
    regular file cut short raises EOFError, as `_member_bytes` makes it for the import)."""
    entries = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
            for member in tar:
                extracted = tar.extractfile(member) if wanted(member, every) else None
                body = extracted.read() if extracted is not None else b""
                if len(body) != (member.size if wanted(member, every) else 0):
                    raise EOFError  # as the import reads a cut entry
                entries.append((member.name, member.type, member.size, body))
    except (tarfile.TarError, EOFError) as error:
        return type(error).__name__
    return entries


def ours_read(data: bytes, every: bool = True) -> list[tuple[str, bytes, int, bytes]] | str:
    """What the import's reader reads of `data`, as `tarfile_read` answers."""
    stream = io.BufferedReader(_BoundedReader(io.BytesIO(data), limit=len(data)))
    entries = []
    try:
        for member, read in _tar_entries(stream):
            body = read() if wanted(member, every) else b""
            entries.append((member.name, member.type, member.size, body))
    except (tarfile.TarError, EOFError) as error:
        return type(error).__name__
    return entries


def tarfile_used(data: bytes) -> bool:
    """Whether the import's reader handed `data` to `tarfile` to read."""
    with mock.patch.object(tarfile, "open", wraps=tarfile.open) as opened:
        ours_read(data)
    return opened.called


@given(
    entries=ENTRIES,
    tar_format=FORMATS,
    cut=st.integers(min_value=0, max_value=4096),
    every=st.booleans(),
)
def test_the_reader_reads_what_tarfile_reads(entries, tar_format, cut, every):
    data = tar_of(entries, tar_format)
    data = data[: len(data) - cut] if cut % 3 == 0 else data

    assert ours_read(data, every) == tarfile_read(data, every)


@given(
    entries=ENTRIES,
    at=st.integers(min_value=0, max_value=3000),
    byte=st.integers(min_value=0, max_value=255),
    every=st.booleans(),
)
def test_a_damaged_archive_is_read_as_tarfile_reads_it(entries, at, byte, every):
    data = bytearray(tar_of(entries, tarfile.USTAR_FORMAT))
    if at < len(data):
        data[at] = byte

    assert ours_read(bytes(data), every) == tarfile_read(bytes(data), every)


def test_an_archive_of_plain_entries_is_read_without_tarfile():
    entries = [("manifest.json", tarfile.REGTYPE, b"{}"), ("docs", tarfile.DIRTYPE, b"")]
    entries.append(("docs/a.md", tarfile.REGTYPE, b"# A\n" * 200))
    data = tar_of(entries, tarfile.PAX_FORMAT)

    assert ours_read(data) == [
        ("manifest.json", tarfile.REGTYPE, 2, b"{}"),
        ("docs", tarfile.DIRTYPE, 0, b""),
        ("docs/a.md", tarfile.REGTYPE, 800, b"# A\n" * 200),
    ]
    assert not tarfile_used(data)


def test_links_devices_and_extended_headers_are_read_by_tarfile_after_the_plain_ones():
    plain = ("docs/a.md", tarfile.REGTYPE, b"a\n")
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE):
        data = tar_of([plain, ("docs/b.md", kind, b"")], tarfile.USTAR_FORMAT)
        read = ours_read(data)
        assert tarfile_used(data)
        assert read == tarfile_read(data)
        assert [entry[0] for entry in read] == ["docs/a.md", "docs/b.md"]
    long_name = ("docs/" + "x/" * 80 + "a.md", tarfile.REGTYPE, b"a")
    for tar_format in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        data = tar_of([plain, long_name], tar_format)
        assert tarfile_used(data)
        assert ours_read(data) == tarfile_read(data)


@given(block=st.binary(min_size=tarfile.BLOCKSIZE, max_size=tarfile.BLOCKSIZE))
def test_a_header_block_sums_as_sum_sums_it(block):
    assert _block_sum(block) == sum(block)


def test_a_block_of_the_largest_bytes_sums_whole():
    # 512 bytes of 255: each half's sum (65,280) is as close as a half gets to Adler-32's
    # modulus (65,521), which a larger half would pass.
    block = b"\xff" * tarfile.BLOCKSIZE

    assert _block_sum(block) == 255 * tarfile.BLOCKSIZE
