"""The judge-reply cache in Redis (the cache itself: :mod:`judgeq.store.reply_cache`), shared by
every worker."""

from __future__ import annotations

import redis
from redis.client import NEVER_DECODE

from judgeq.judges.base import JudgeReply
from judgeq.redis_connect import store_errors
from judgeq.store.reply_cache import decode_reply, encode_reply

__all__ = ["RedisCache"]


class RedisCache:
    """The judge-reply cache in Redis (:mod:`judgeq.store.reply_cache`): ``judgeq:cache:<key>`` strings
    with a TTL, shared by every worker."""

    def __init__(self, client: redis.Redis, ttl_s: float) -> None:
        self.r, self.ttl_s = client, max(1, int(ttl_s))

    @store_errors
    def get(self, key: str) -> JudgeReply | None:
        name = f"judgeq:cache:{key}"
        raw = self.r.execute_command("GET", name, **{NEVER_DECODE: True})
        return decode_reply(raw, f"reply cache entry {name}")

    @store_errors
    def put(self, key: str, reply: JudgeReply) -> None:
        self.r.set(f"judgeq:cache:{key}", encode_reply(reply), ex=self.ttl_s)

    @store_errors
    def get_many(self, keys: list[str]) -> dict[str, JudgeReply]:
        """One MGET for a grade message's requests."""
        if not keys:
            return {}
        found = {}
        names = [f"judgeq:cache:{k}" for k in keys]
        raws = self.r.execute_command("MGET", *names, **{NEVER_DECODE: True})
        for key, raw in zip(keys, raws, strict=True):
            reply = decode_reply(raw, f"reply cache entry judgeq:cache:{key}")
            if reply is not None:
                found[key] = reply
        return found

    @store_errors
    def put_many(self, items: list[tuple[str, JudgeReply]]) -> None:
        p = self.r.pipeline(transaction=False)
        for key, reply in items:
            p.set(f"judgeq:cache:{key}", encode_reply(reply), ex=self.ttl_s)
        p.execute()
