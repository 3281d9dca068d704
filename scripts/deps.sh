#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages (bookworm). Idempotent: does
# nothing when they are already installed. Needs root (or sudo) only when something is missing.
set -euo pipefail
#   scripts/deps.sh               # everything the build and the test suite use
#   scripts/deps.sh --build-only  # what building the binaries needs (the Dockerfile's build stage)
pkgs=(cmake g++ make pkg-config libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev
      libboost-graph-dev catch2 prometheus-cpp-dev libssl-dev libcli11-dev zlib1g-dev
      libbrotli-dev curl openssl libgrpc++-dev protobuf-compiler-grpc
      protobuf-compiler libprotobuf-dev libsimdjson-dev
      coinor-libclp-dev)  # the bench's LP bound (bench/lp_bound.cpp)
if [ "${1:-}" != "--build-only" ]; then
  pkgs+=(ccache     # a fresh clone's build reuses earlier objects (CI)
         chromium)  # the GPU map's browser test (tests/ui/)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
