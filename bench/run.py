"""``make bench``: the store benchmark, then the API benchmark; both update bench/RESULTS.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    status = 0
    for script in ("store_bench.py", "api_bench.py"):
        path = HERE / script
        if not path.exists():
            print(f"skipping {script}: not present")
            continue
        status |= subprocess.call([sys.executable, str(path), *sys.argv[1:]])
    return status


if __name__ == "__main__":
    sys.exit(main())
