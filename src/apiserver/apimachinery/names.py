"""Names for objects created with ``metadata.generateName``.

Follows k8s.io/apiserver ``pkg/storage/names/generate.go`` and ``k8s.io/apimachinery``
``pkg/util/rand`` (``String``): the prefix is cut to 58 bytes (63 minus the 5 random
characters) and 5 characters drawn from ``bcdfghjklmnpqrstvwxz2456789`` -- no vowels, no
``0``/``1``/``3`` -- are appended. The store retries a taken name a few times
(k8s.io/apiserver ``pkg/registry/generic/registry/store.go``, ``Create``).
"""

from __future__ import annotations

import random

MAX_NAME_LENGTH = 63
RANDOM_LENGTH = 5
MAX_GENERATED_NAME_LENGTH = MAX_NAME_LENGTH - RANDOM_LENGTH
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"

_SYSTEM_RANDOM = random.SystemRandom()
_SPACE = len(ALPHANUMS) ** RANDOM_LENGTH
_BITS = _SPACE.bit_length()
_PAIR_SPACE = len(ALPHANUMS) ** 2
#: Every two-character string of the alphabet, indexed by its number in base 27.
_PAIRS = [a + b for b in ALPHANUMS for a in ALPHANUMS]


def generate_name(prefix: str, rng: random.Random | None = None) -> str:
    """``prefix`` (cut to 58 UTF-8 bytes) followed by 5 random characters.

    A cut inside a multi-byte character leaves bytes Go would later print as U+FFFD; that
    is what is returned here too (such a prefix fails name validation anyway).
    """
    if len(prefix) * 4 > MAX_GENERATED_NAME_LENGTH:  # else even 4-byte characters fit
        raw = prefix.encode("utf-8", errors="surrogatepass")
        if len(raw) > MAX_GENERATED_NAME_LENGTH:
            prefix = raw[:MAX_GENERATED_NAME_LENGTH].decode("utf-8", errors="replace")
    source = rng if rng is not None else _SYSTEM_RANDOM
    # One draw for the five characters (a uniform number below 27**5, by rejection) rather
    # than five ``choice`` calls: a create with generateName pays this every time.
    drawn = source.getrandbits(_BITS)
    while drawn >= _SPACE:
        drawn = source.getrandbits(_BITS)
    return (
        prefix
        + _PAIRS[drawn % _PAIR_SPACE]
        + _PAIRS[drawn // _PAIR_SPACE % _PAIR_SPACE]
        + (ALPHANUMS[drawn // (_PAIR_SPACE * _PAIR_SPACE)])
    )


__all__ = ["ALPHANUMS", "MAX_GENERATED_NAME_LENGTH", "generate_name"]
