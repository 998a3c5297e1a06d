"""The open-files limit, raised as a Go program raises it.

Since Go 1.19 the runtime of every Go program on Linux raises its soft ``RLIMIT_NOFILE`` to
the hard limit at start (``syscall`` package, ``rlimit.go``), so kube-apiserver serves as many
connections as the hard limit allows even where the soft limit is the usual 1,024 (one
HTTP/1.1 watch is one connection). Python does not, so :mod:`apiserver.tap` calls
:func:`raise_open_files_limit` when the server starts; under systemd the unit's
``LimitNOFILE=`` sets both limits anyway.
"""

from __future__ import annotations

import resource


def raise_open_files_limit() -> tuple[int, int]:
    """Set the soft open-files limit to the hard one; return (before, after) soft limits.

    An unlimited hard limit leaves the soft one alone (Go does the same: it only raises to a
    finite hard limit), and so does a refusal (the limit stays what it was).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return soft, soft
    return soft, hard
