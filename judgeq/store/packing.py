"""The stored form of results and cached replies: a format version byte, then the body.

Version ``0x01`` is JSON deflated with a preset dictionary (each kind of entry its own); an
entry starting with ``{`` is plain JSON, the form before packing. Any other first byte is the
format of a newer judgeq: it is one clear :class:`UnknownFormat` naming the entry, never a
failed read of everything beside it (a rolling upgrade has old and new workers writing at once).
From version ``0x02`` on, a stored result's version byte is followed by its job index (4 bytes,
big-endian), so an older reader can still name the job whose result it cannot read; no version
is ever ``0x7B`` (``{``).
"""

from __future__ import annotations

import json
import zlib

from judgeq.errors import StoreError
from judgeq.grading.result import Result
from judgeq.jobs.kinds import read_result

__all__ = [
    "DEFLATED",
    "UnknownFormat",
    "deflate",
    "inflate",
    "pack_result",
    "packing_dictionary",
    "unpack_result",
]

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
    if version == _PLAIN:  # the writers of plain JSON began with "{", never with white space
        return blob
    index = int.from_bytes(blob[1:5], "big") if indexed and len(blob) >= 5 else None
    raise UnknownFormat(entry, version, index)


# -- the compact stored form (Redis) -------------------------------------------------------------

_STATIC_DICT = (
    '{"job_id":"","index":0,"kind":"question","status":"null","null_reason":"parse_error",'
    '"timeout","rate_limited","overloaded","server_error","lost","canceled","internal_error",'
    '"position_inconsistent","ceiling_applied","judges_disagree","safety_cap",'
    '"scores":{},"overall":7.0,"passed":false,"flags":[],"safety_categories":[],"notes":"",'
    '"holistic":8.0,"raw":"","grading_latency_ms":0.0,"attempts":1,"input_tokens":0,'
    '"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,'
    '"cached":true,"batch":true,"model":"","label":null,"input_key":"","judge_scores":{},'
    '"judge_usage":{},"model_b":"","winner":"tie","votes":["a","b","tie"],"len_a":0,"len_b":0,'
    '"question_id":"","question":"","expected_answer":"","retrieved_doc_ids":[],'
    '"needle_found":true,"rank":1,"hit_at_1":true,"hit_at_5":false,"hit_at_k":{},'
    '"llm_grade":2,"llm_reasoning":"","total_score":0.0,"latency_ms":0.0,'
    '"key_facts_present":[],"key_facts_missing":[],'
    " The response is accurate and relevant, but it does not the answer is clear and "
    "concise and the user's question. The assistant provides a correct, helpful, complete"
)


def packing_dictionary(constants: dict[str, str], dimensions: list[str]) -> bytes:
    """The deflate dictionary of a run's stored results: field names, common words, and the
    run's own rubric, judge and dimension names, so each result pays for little but its own
    values (most of all its reasoning). Deterministic: the reader derives the same one."""
    extra = json.dumps({**constants, "scores": dict.fromkeys(dimensions, 7.0)}, separators=(",", ":"))
    return (_STATIC_DICT + extra).encode()


def pack_result(result: Result, dictionary: bytes) -> bytes:
    """``result`` as compact JSON (fields at their defaults left out), deflated with the run's
    dictionary: a third to a fifth of the JSON's size, every field kept (:mod:`judgeq.store.packing`)."""
    data = result.model_dump(mode="json", exclude_defaults=True)
    data["status"] = result.status
    data["index"] = result.index
    data["kind"] = result.kind  # its class's default, which the reader needs to choose its class
    return deflate(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(), dictionary)


def unpack_result(blob: bytes, dictionary: bytes, entry: str = "a stored result") -> Result:
    """The inverse of :func:`pack_result` (plain JSON is read too); UnknownFormat, naming
    ``entry``, for a format this judgeq does not know."""
    return read_result(inflate(blob, dictionary, entry, indexed=True))
