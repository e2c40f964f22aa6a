#!/bin/sh
# CTest kubernetes_manifests_valid: every manifest in packaging/kubernetes/ passes the
# Kubernetes schemas offline (validate_manifests.js, with kubernetes-models), and each file of
# tests/kubernetes/bad/ is refused for its reason.
# Skips (exit 77) without node or the validator's packages, which
# scripts/setup-kubernetes-validator installs; fails instead when
# DOCKHAND_REQUIRE_KUBERNETES_VALIDATOR=1 (CI sets it: there the check must run).
# Usage: validate-manifests.sh SOURCE_DIR
set -eu
src="$1"
dir="${DOCKHAND_KUBERNETES_VALIDATOR_DIR:-$HOME/.cache/dockhand/kubernetes-validator}"

skip() {
  echo "SKIP kubernetes_manifests_valid: $* (scripts/setup-kubernetes-validator installs it)"
  if [ "${DOCKHAND_REQUIRE_KUBERNETES_VALIDATOR:-0}" = 1 ]; then
    echo "DOCKHAND_REQUIRE_KUBERNETES_VALIDATOR=1: the validator is required here" >&2
    exit 1
  fi
  exit 77
}
command -v node >/dev/null 2>&1 || skip "no node on PATH"
[ -f "$dir/node_modules/kubernetes-models/package.json" ] || skip "no kubernetes-models in $dir/node_modules"
[ -f "$dir/node_modules/js-yaml/package.json" ] || skip "no js-yaml in $dir/node_modules"

exec node "$src/tests/kubernetes/validate_manifests.js" "$dir" "$src"/packaging/kubernetes/*.yaml \
  --expect-invalid "$src"/tests/kubernetes/bad/*.yaml
