"""The checked-in ``*_pb2.py``/``*_pb2.pyi`` are what ``make proto`` makes of the ``.proto``
files (skipped where protoc, from ``grpcio-tools``, is not installed: it is dev-only)."""

from __future__ import annotations

from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
GENERATED = SRC / "apiserver" / "protobuf" / "generated"


def test_generated_modules_are_current(tmp_path: Path) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc")
    protos = sorted(str(p.relative_to(SRC)) for p in GENERATED.glob("*.proto"))
    assert protos
    args = ["protoc", f"-I{SRC}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", *protos]
    assert protoc.main(args) == 0
    made = tmp_path / "apiserver" / "protobuf" / "generated"
    names = sorted(p.name for p in made.iterdir())
    assert names == sorted(p.name for p in GENERATED.glob("*_pb2.py*"))
    for name in names:
        assert (made / name).read_bytes() == (GENERATED / name).read_bytes(), (
            f"{name} is stale: run make proto"
        )
