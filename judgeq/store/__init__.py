"""Where results are counted once and kept: the Store protocol and its memory and Redis
backends (Lua in ``lua/``), the reply cache, run folders, archives and the stored form."""

__all__: list[str] = []
