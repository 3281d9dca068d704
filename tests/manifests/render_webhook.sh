#!/usr/bin/env bash
# Prints `kubectl kustomize` of manifests/ with the admission webhook turned on the way
# docs/admission-webhook.md "Installing" tells users to: the two commented `components:` lines in
# manifests/kustomization.yaml uncommented (in a copy; the checkout is left alone). Fails when
# those lines are not there as the docs quote them.
# Usage: tests/manifests/render_webhook.sh REPO_ROOT >out.yaml
set -euo pipefail
root="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/manifests" "$tmp/manifests"
k="$tmp/manifests/kustomization.yaml"
if ! grep -qx '# components:' "$k" || ! grep -qx '# - webhook' "$k"; then
  echo "manifests/kustomization.yaml lacks the commented lines '# components:' and '# - webhook'" >&2
  exit 1
fi
sed -i 's/^# components:$/components:/; s/^# - webhook$/- webhook/' "$k"
kubectl kustomize "$tmp/manifests"
