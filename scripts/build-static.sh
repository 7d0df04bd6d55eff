#!/bin/sh
# The release binary, as the Docker image carries it: static (no cgo),
# paths trimmed, no symbol table, the version from $TOLLGATE_VERSION when
# set (a build without .git has no commit to read). The Dockerfile and CI
# both build with this script, so CI tests the image's binary.
set -eu
cd "$(dirname "$0")/.."
out=${1:-tollgate}
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.release=${TOLLGATE_VERSION:-}" -o "$out" ./cmd/tollgate
