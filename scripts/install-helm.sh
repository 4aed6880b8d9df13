#!/usr/bin/env bash
# Install helm from the Go module proxy (the only place CI may fetch it from).
#
# No-op when `helm` is already on PATH or already built in "$(go env GOPATH)/bin".
# Otherwise builds the pinned release with `go install` into "$(go env GOPATH)/bin",
# with the same -ldflags as helm's own Makefile, so that `helm version` reports the
# release and `helm template`/`helm lint` assume the Kubernetes version of the
# client-go helm was built with (a plain `go install` leaves both at defaults:
# "v3.22" and Kubernetes 1.20, which charts with a kubeVersion constraint reject).
#
# Usage: scripts/install-helm.sh        then: export PATH="$PATH:$(go env GOPATH)/bin"
# Override the release with HELM_VERSION=v3.x.y.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
MODULE="helm.sh/helm/v3"

if command -v helm >/dev/null 2>&1; then
    echo "install-helm: helm already on PATH: $(command -v helm) ($(helm version --short 2>/dev/null || echo '?'))" >&2
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
        export PATH="${PATH}:/usr/local/go/bin"
    else
        echo "install-helm: go not found (looked on PATH and in /usr/local/go/bin)" >&2
        exit 1
    fi
fi

gobin="$(go env GOPATH)/bin"
if [ -x "${gobin}/helm" ] && "${gobin}/helm" version --short 2>/dev/null | grep -q "^${HELM_VERSION}"; then
    echo "install-helm: ${gobin}/helm is already ${HELM_VERSION}; add ${gobin} to PATH" >&2
    exit 0
fi

start="$(date +%s)"
echo "install-helm: go install ${MODULE}/cmd/helm@${HELM_VERSION} (a few minutes on 2 cores)" >&2

# The Kubernetes version helm assumes offline comes from its client-go
# dependency, exactly as helm's Makefile computes it (major is client-go's + 1).
moddir="$(GOFLAGS=-mod=mod go mod download -json "${MODULE}@${HELM_VERSION}" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
clientgo="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v\([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p' "${moddir}/go.mod")"
read -r cg_major cg_minor <<<"${clientgo}"
k8s_major="$((cg_major + 1))"
k8s_minor="${cg_minor}"

ldflags="-s -w"
ldflags+=" -X ${MODULE}/internal/version.version=${HELM_VERSION}"
ldflags+=" -X ${MODULE}/internal/version.metadata="
ldflags+=" -X ${MODULE}/pkg/lint/rules.k8sVersionMajor=${k8s_major}"
ldflags+=" -X ${MODULE}/pkg/lint/rules.k8sVersionMinor=${k8s_minor}"
ldflags+=" -X ${MODULE}/pkg/chartutil.k8sVersionMajor=${k8s_major}"
ldflags+=" -X ${MODULE}/pkg/chartutil.k8sVersionMinor=${k8s_minor}"

GOFLAGS=-mod=mod CGO_ENABLED=0 go install -ldflags "${ldflags}" "${MODULE}/cmd/helm@${HELM_VERSION}"

echo "install-helm: built ${gobin}/helm in $(( $(date +%s) - start ))s (default Kubernetes ${k8s_major}.${k8s_minor})" >&2
"${gobin}/helm" version --short >&2
