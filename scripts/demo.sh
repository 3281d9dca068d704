#!/usr/bin/env bash
# Sets up and starts the extender on the bundled demo cluster (examples/demo-cluster.yaml):
#   scripts/demo.sh [extra gapless-extender flags]   e.g. --policy policies/default.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# Release, as scripts/test.sh and the Dockerfile build it, so the two scripts share build/.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target gapless-extender
exec build/gapless-extender --cluster examples/demo-cluster.yaml "$@"
