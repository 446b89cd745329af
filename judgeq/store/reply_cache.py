"""The judge-reply cache: a re-run of the same batch with the same rubric and judge makes no
judge call.

A reply is stored under :func:`cache_key`, a hash of the exact request (the judge's provider,
server and model, and the whole request body) and of the rubric's name, version and
fingerprint, so a cached reply is never reused for another server (a stand-in's verdicts for
the real API), another model, another rubric or another version of the same rubric (even one
whose text renders alike).  Only replies that graded are stored: a reply that could not
be parsed, or a failure, is asked again next time.  Entries expire after a TTL
(``JUDGEQ_CACHE_TTL``, 7 days); ``--no-cache`` turns the cache off for a run.

Implementations: :class:`MemoryCache` (tests), :class:`SqliteCache` (``judgeq run``: a file
in ``JUDGEQ_CACHE_DIR``, by default ``$XDG_CACHE_HOME/judgeq`` or ``~/.cache/judgeq``, so a
re-run in a new process hits), and the Redis one (:mod:`judgeq.store.redis`, shared by every
worker).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from judgeq.grading.request import JudgeRequest
from judgeq.judges.base import JudgeReply
from judgeq.rubric.model import Rubric
from judgeq.settings import default
from judgeq.store.packing import UnknownFormat, deflate, inflate

__all__ = [
    "KEY_VERSION",
    "MemoryCache",
    "Prefetched",
    "ReplyCache",
    "SqliteCache",
    "cache_key",
    "decode_reply",
    "encode_reply",
    "get_many",
]

log = logging.getLogger(__name__)

KEY_VERSION = 2
"""Bumped when the key's recipe changes, so old entries are never misread. 2: the judge's
identity names its server (an Anthropic judge's key was its model alone, so a stand-in's
verdicts were served to a run against the real API; entries of 1 cannot tell which server
answered them, and are never read)."""


def _asked(identity: str, request: JudgeRequest) -> dict[str, Any]:
    """What a request asks, as the key hashes it: the key's own recipe, frozen with
    :data:`KEY_VERSION` (its layout was the Messages API's when version 2 was made; it is not
    any provider's wire format, which may change without changing a key)."""
    system: list[dict[str, Any]] = [{"type": "text", "text": t} for t in request.system]
    system[-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": identity,
        "max_tokens": request.max_tokens,
        "system": system,
        "messages": [{"role": "user", "content": request.user}],
        "output_config": {"format": {"type": "json_schema", "schema": request.output_schema}},
    }


def cache_key(identity: str, request: JudgeRequest, rubric: Rubric) -> str:
    """The key of ``request`` to the judge ``identity`` names (:func:`judgeq.judges.base.cache_identity`:
    provider, server and model) under ``rubric``."""
    body = _asked(identity, request)
    material = {
        "v": KEY_VERSION,
        "rubric": [rubric.name, rubric.version, rubric.fingerprint],
        "request": body,
    }
    if request.sample:  # a cascade's further sample: its own reply (sample 0 keeps the key it had)
        material["sample"] = request.sample
    text = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_DICTIONARY = (
    b'{"text":"{\\"reasoning\\":\\"The response\\",\\"score\\":8,\\"verdict\\":\\"pass\\"}",'
    b'"stop_reason":"end_turn","input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":0,'
    b'"cache_creation_input_tokens":0,"model":"claude-sonnet-4-5","paid_by":"","tool_input":'
    b" The response is accurate and relevant, but it does not the answer is clear and concise and"
    b" the user's question. The assistant provides a correct, helpful, complete"
)
"""The deflate dictionary of cached replies: their field names and a verdict's common words.
Frozen: entries written with it are read for the cache's whole TTL by every worker, so it must
never change (a new one needs a new format version, :mod:`judgeq.store.packing`)."""


UNKEPT = ("headers", "response_format", "limit_input_tokens")
"""Reply fields a cache entry leaves out: the moment's rate-limit headers and what the call
counted against them (a cached reply is no call), and provenance (a
cached reply's call belongs to the run that paid for it); left out, too, so a judgeq that does
not know them reads the entry."""
KEPT = frozenset(f.name for f in dataclasses.fields(JudgeReply)) - set(UNKEPT)
"""Fields read from an entry: any other (written by a newer judgeq) is ignored."""


def encode_reply(reply: JudgeReply) -> bytes:
    """A reply as stored in a cache: compact JSON (fields at their defaults and the rate-limit
    headers left out: state of the moment, not part of the answer), deflated with a dictionary
    (a third to a half of the JSON's size; every field of the answer kept)."""
    data = {k: v for k, v in dataclasses.asdict(reply).items() if k not in UNKEPT and v not in (None, 0, "")}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return deflate(text, _DICTIONARY)


def decode_reply(raw: str | bytes | None, entry: str = "a reply cache entry") -> JudgeReply | None:
    """The inverse of :func:`encode_reply` (plain JSON, the format before packing, too). A
    damaged entry is a miss; so is one in a format this judgeq cannot read (written by a newer
    judgeq), with one warning naming ``entry``: the judge is asked again."""
    if raw is None:
        return None
    try:
        if isinstance(raw, bytes):
            raw = inflate(raw, _DICTIONARY, entry)
        data = json.loads(raw)
        return JudgeReply(**{k: v for k, v in data.items() if k in KEPT})
    except UnknownFormat as e:
        log.warning("%s: asking the judge again", e)
        return None
    except (ValueError, TypeError, zlib.error):
        return None  # a damaged entry is a miss


class ReplyCache(Protocol):
    """Where graded judge replies are kept for re-runs."""

    def get(self, key: str) -> JudgeReply | None: ...
    def put(self, key: str, reply: JudgeReply) -> None: ...


class Prefetched:
    """One grade message's view of a cache: replies read for all its jobs at once (one round
    trip), new replies kept and written at once by :meth:`flush`."""

    def __init__(self, cache: ReplyCache, hits: dict[str, JudgeReply]) -> None:
        self.cache, self.hits = cache, hits
        self.new: list[tuple[str, JudgeReply]] = []
        self._lock = threading.Lock()

    def get(self, key: str) -> JudgeReply | None:
        return self.hits.get(key)

    def put(self, key: str, reply: JudgeReply) -> None:
        with self._lock:
            self.new.append((key, reply))

    def flush(self) -> None:
        with self._lock:
            items, self.new = self.new, []
        if items:
            put_many = getattr(self.cache, "put_many", None)
            if put_many is not None:
                put_many(items)
            else:
                for key, reply in items:
                    self.cache.put(key, reply)


def get_many(cache: ReplyCache, keys: list[str]) -> dict[str, JudgeReply]:
    """The cached replies of ``keys`` (the cache's own batch read when it has one)."""
    batch = getattr(cache, "get_many", None)
    if batch is not None:
        return dict(batch(keys))
    found = {}
    for key in keys:
        reply = cache.get(key)
        if reply is not None:
            found[key] = reply
    return found


class MemoryCache:
    """A cache in this process (tests)."""

    def __init__(self, ttl_s: float = default("cache_ttl"), clock: Callable[[], float] = time.time) -> None:
        self.ttl_s, self._clock = ttl_s, clock
        self._data: dict[str, tuple[float, bytes]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> JudgeReply | None:
        with self._lock:
            hit = self._data.get(key)
        if hit is None or hit[0] < self._clock():
            return None
        return decode_reply(hit[1])

    def put(self, key: str, reply: JudgeReply) -> None:
        with self._lock:
            self._data[key] = (self._clock() + self.ttl_s, encode_reply(reply))


class SqliteCache:
    """A cache in one SQLite file (``judgeq run``), safe for the runner's threads; the file is
    made on first use."""

    def __init__(self, path: Path, ttl_s: float = default("cache_ttl")) -> None:
        self.path, self.ttl_s = path, ttl_s
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:  # call with the lock held
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS replies "
                "(key TEXT PRIMARY KEY, expires REAL NOT NULL, reply TEXT NOT NULL)"
            )
            db.execute("DELETE FROM replies WHERE expires < ?", (time.time(),))
            self._db = db
        return self._db

    def get(self, key: str) -> JudgeReply | None:
        with self._lock:
            row = (
                self._conn()
                .execute("SELECT reply FROM replies WHERE key = ? AND expires >= ?", (key, time.time()))
                .fetchone()
            )
        return decode_reply(row[0], f"reply cache entry {key} in {self.path}") if row else None

    def put(self, key: str, reply: JudgeReply) -> None:
        with self._lock:
            self._conn().execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?, ?)",
                (key, time.time() + self.ttl_s, encode_reply(reply)),
            )
