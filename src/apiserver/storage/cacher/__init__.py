"""The watch cache: serves watches and lists of cached prefixes (events) from memory in front
of either store backend. See :mod:`.cacher`."""

from apiserver.storage.cacher.cacher import (
    CATCH_UP_GRACE,
    FRESHNESS_TIMEOUT,
    Cacher,
    CacheWatch,
)

__all__ = ["CATCH_UP_GRACE", "FRESHNESS_TIMEOUT", "CacheWatch", "Cacher"]
