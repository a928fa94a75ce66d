#!/usr/bin/env bash
# Generate code from proto/ under the root folder $1 (default: the repository):
# TypeScript with buf + protoc-gen-es into src/gen, Python with grpcio-tools into python-bridge/agl_bridge/gen.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-.}"
py_gen="$root/python-bridge/agl_bridge/gen"

npx buf generate --output "$root"

rm -rf "$py_gen" && mkdir -p "$py_gen"
python-bridge/.venv/bin/python -m grpc_tools.protoc -Iproto \
  --python_out="$py_gen" --pyi_out="$py_gen" --grpc_python_out="$py_gen" proto/agl/v1/*.proto

# grpcio-tools writes absolute imports that follow the proto path ("from agl.v1 import types_pb2"); make them
# package-qualified so agl_bridge.gen imports without touching sys.path (grpc/grpc#29390 explains why protoc won't).
find "$py_gen" \( -name '*.py' -o -name '*.pyi' \) -exec \
  sed -i -E 's/^from agl\.v1 import /from agl_bridge.gen.agl.v1 import /' {} +
for d in "$py_gen" "$py_gen/agl" "$py_gen/agl/v1"; do : > "$d/__init__.py"; done
