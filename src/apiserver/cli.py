"""The ``apiserver`` console script: the same server as ``twistd apiserver``, in the foreground.

It runs twistd with ``--nodaemon`` and no pid file (what a supervisor or systemd wants) and
passes every argument to the plugin's options, so both entry points share one option table.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    from twisted.scripts.twistd import run

    args = list(sys.argv[1:] if argv is None else argv)
    sys.argv = ["apiserver", "--nodaemon", "--pidfile=", "apiserver", *args]
    run()


if __name__ == "__main__":
    main()
