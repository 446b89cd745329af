"""The stored form of results and cached replies: a format version byte, then the body.

Version ``0x01`` is JSON deflated with a preset dictionary (each kind of entry its own); an
entry starting with ``{`` is plain JSON, the form before packing. Any other first byte is the
format of a newer judgeq: it is one clear :class:`UnknownFormat` naming the entry, never a
failed read of everything beside it (a rolling upgrade has old and new workers writing at once).
From version ``0x02`` on, a stored result's version byte is followed by its job index (4 bytes,
big-endian), so an older reader can still name the job whose result it cannot read.
"""

from __future__ import annotations

import zlib

from judgeq.errors import StoreError

__all__ = ["DEFLATED", "UnknownFormat", "deflate", "inflate"]

DEFLATED = 1
"""The format version of deflated JSON."""
_PLAIN = ord("{")


class UnknownFormat(StoreError):
    """An entry written in a format this judgeq cannot read (by a newer judgeq)."""

    def __init__(self, entry: str, version: int, index: int | None = None) -> None:
        job = f" (job #{index})" if index is not None else ""
        super().__init__(
            f"{entry}{job} is in storage format {version}, which this judgeq cannot read; "
            "upgrade judgeq on this machine"
        )
        self.entry, self.version, self.index = entry, version, index


def deflate(text: bytes, dictionary: bytes) -> bytes:
    """``text`` in the current format: the version byte, then deflated with ``dictionary``."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=dictionary)
    return bytes([DEFLATED]) + packer.compress(text) + packer.flush()


def inflate(blob: bytes, dictionary: bytes, entry: str, *, indexed: bool = False) -> bytes:
    """The JSON text of a stored ``blob`` (plain JSON is returned as it is); UnknownFormat for
    a version this judgeq does not know, naming ``entry`` (and, for an ``indexed`` entry, a
    stored result, its job); zlib.error for a damaged body."""
    version = blob[0] if blob else _PLAIN
    if version == DEFLATED:
        unpacker = zlib.decompressobj(-15, zdict=dictionary)
        return unpacker.decompress(blob[1:]) + unpacker.flush()
    if version == _PLAIN or chr(version).isspace():
        return blob
    index = int.from_bytes(blob[1:5], "big") if indexed and len(blob) >= 5 else None
    raise UnknownFormat(entry, version, index)
