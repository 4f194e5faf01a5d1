"""Regenerate the gRPC code in ``scaler/generated`` from ``proto/externalscaler.proto``.

Run ``python -m scaler.codegen`` after changing the proto; ``--check`` exits 1 when the
committed code is stale (the test suite runs it).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
PACKAGE_DIR = "scaler/generated"
GENERATED = ROOT / PACKAGE_DIR
PROTO_NAME = "externalscaler.proto"
OUTPUTS = (
    "externalscaler_pb2.py",
    "externalscaler_pb2.pyi",
    "externalscaler_pb2_grpc.py",
    "externalscaler_pb2_grpc.pyi",
)


def generate(out_dir: Path) -> None:
    """Write the generated modules into ``out_dir``/scaler/generated."""
    plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    grpc_plugin = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    out_dir.mkdir(parents=True, exist_ok=True)
    # Mapping the proto into the package path makes the generated imports absolute
    # (``from scaler.generated import externalscaler_pb2``) with no text patching.
    args = [
        "grpc_tools.protoc",
        f"-I{PACKAGE_DIR}={PROTO_DIR}",
        f"--plugin=protoc-gen-mypy={plugin}",
        f"--plugin=protoc-gen-mypy_grpc={grpc_plugin}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        f"{PACKAGE_DIR}/{PROTO_NAME}",
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def stale_files() -> list[str]:
    """Names of generated files that differ from what the proto produces now."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        fresh = Path(tmp) / PACKAGE_DIR
        return [
            name
            for name in OUTPUTS
            if not (GENERATED / name).exists()
            or not filecmp.cmp(fresh / name, GENERATED / name, shallow=False)
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the code is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print(f"stale generated code: {', '.join(stale)}; run python -m scaler.codegen")
            return 1
        print("generated code is up to date")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        for name in OUTPUTS:
            shutil.copyfile(Path(tmp) / PACKAGE_DIR / name, GENERATED / name)
    print(f"regenerated {', '.join(OUTPUTS)} in {PACKAGE_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
