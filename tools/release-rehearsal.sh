#!/usr/bin/env bash
# A local rehearsal of .github/workflows/release.yml, step for step, against a registry on
# loopback instead of PyPI and ghcr.io (tests/test_release.py runs it; docs/images.md):
#
#   1. version  tools/release/check_versions.py (one version, one spelling, everywhere)
#   2. wheel    the wheel and sdist (as `python -m build`), their names and metadata checked
#   3. images   both Dockerfile targets (tools/images/build.sh: podman, Debian-assembled base)
#   4. registry Debian's docker-registry on 127.0.0.1:<free port>
#   5. push     both images as <registry>/dyn-gitops/<name>:<version>, labels read back, the
#               controller image pulled back and run
#   6. chart    `helm package`, `helm push` as an OCI artifact to the same registry (its digest
#               parsed as the workflow does to sign it)
#   7. install  `helm install` from that OCI chart, image from that registry, into the cluster
#               of --kubeconfig (server-side dry-run: every object admitted by the API server)
#
# Not rehearsed (they need GitHub's OIDC identity or other architectures): PyPI trusted
# publishing, cosign keyless signing and SBOM attestation, the linux/arm64 image.
#
#   tools/release-rehearsal.sh --kubeconfig FILE [--workdir DIR] [--keep]
#
# Env: HELM (default: helm from tools/test-bins/build.sh's bin dir, else PATH), PYTHON (python3).
# stdout: one line per step with its time; last line "rehearsal: ok <version> <seconds>s".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PYTHON=${PYTHON:-python3}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$REPO/tools/images/containers.conf}

kubeconfig="" work="" keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --kubeconfig) kubeconfig=$2; shift 2 ;;
    --workdir) work=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 --kubeconfig FILE [--workdir DIR] [--keep]" >&2; exit 2 ;;
  esac
done
if [ -z "$kubeconfig" ] || [ ! -f "$kubeconfig" ]; then
  echo "rehearsal: --kubeconfig FILE is required" >&2
  exit 2
fi
if [ -z "${HELM:-}" ]; then
  HELM=$(bash "$REPO/tools/test-bins/build.sh" --print-dir)/helm
  [ -x "$HELM" ] || HELM=$(command -v helm || true)
fi
[ -x "$HELM" ] || { echo "rehearsal: no helm (set HELM or run tools/test-bins/build.sh)" >&2; exit 1; }
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/dyn-gitops-rehearsal.XXXXXX")
mkdir -p "$work"

registry_pid="" pulled=""
cleanup() {
  [ -z "$pulled" ] || podman untag "$pulled" "$pulled" >/dev/null 2>&1 || true
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  [ -z "$registry_pid" ] || wait "$registry_pid" 2>/dev/null || true
  [ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

t_all=$SECONDS
t=$SECONDS
step() { printf 'rehearsal: %-8s %4ss  %s\n' "$1" "$((SECONDS - t))" "$2"; t=$SECONDS; }
fail() { echo "rehearsal: FAILED: $*" >&2; exit 1; }

# 1. version (the workflow's `version` job; a tag would be checked with --tag)
version=$("$PYTHON" "$REPO/tools/release/check_versions.py") || fail "versions disagree (above)"
step version "$version"

# 2. wheel (the workflow's `wheel` job builds with `python -m build`; pip's PEP 517 build is the
#    same backend and needs nothing extra here)
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$REPO" >&2
whl="$work/dist/dyn_gitops-$version-py3-none-any.whl"
[ -f "$whl" ] || fail "no $whl (found: $(ls "$work/dist"))"
"$PYTHON" - "$whl" "$version" <<'EOF' || fail "wheel metadata"
import sys, zipfile
whl, version = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    meta = z.read(f"dyn_gitops-{version}.dist-info/METADATA").decode()
    entry_points = z.read(f"dyn_gitops-{version}.dist-info/entry_points.txt").decode()
    names = z.namelist()
assert f"\nVersion: {version}\n" in meta, "Version in METADATA"
for ep in ("dyn-gitops = dyn_gitops.oneshot:main", "dyn-gitops-operator = dyn_gitops_operator.__main__:main"):
    assert ep in entry_points, ep
assert any(n.startswith("dyn_gitops_operator/") for n in names), "the controller package"
EOF
step wheel "$(basename "$whl")"

# 3. images (the workflow's `images` job: buildx, here podman on the Debian-assembled base)
refs=$(bash "$REPO/tools/images/build.sh") || fail "tools/images/build.sh"
cmp_ref=$(sed -n 's/^cmp=//p' <<<"$refs")
ctl_ref=$(sed -n 's/^controller=//p' <<<"$refs")
step images "$cmp_ref $ctl_ref"

# 4. a registry on loopback
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
registry=127.0.0.1:$port
mkdir -p "$work/registry"
cat >"$work/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: $registry
EOF
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 1 300); do
  "$PYTHON" -c "import urllib.request as u; u.urlopen('http://$registry/v2/', timeout=2)" 2>/dev/null && break
  kill -0 "$registry_pid" 2>/dev/null || fail "docker-registry exited: $(cat "$work/registry.log")"
  sleep 0.2
done
step registry "http://$registry"

# 5. push the images under their release names, read the labels back from the registry
for pair in "dyn-gitops-cmp=$cmp_ref" "dyn-gitops=$ctl_ref"; do
  name=${pair%%=*} ref=${pair#*=}
  dest=$registry/dyn-gitops/$name:$version
  podman push --quiet --tls-verify=false "$ref" "docker://$dest" >&2
  label=$(skopeo inspect --tls-verify=false --format '{{ index .Labels "org.opencontainers.image.version" }}' "docker://$dest")
  [ "$label" = "$version" ] || fail "$dest: label org.opencontainers.image.version=$label, expected $version"
done
# what a cluster would pull runs: the controller image, pulled back from the registry
pulled=$registry/dyn-gitops/dyn-gitops:$version
got=$(podman run --rm --pull=always --tls-verify=false --network=none --read-only \
  "$registry/dyn-gitops/dyn-gitops:$version" --version 2>"$work/pull.log") || fail "pull and run: $(cat "$work/pull.log")"
# dyn-gitops --version's format (dyn_gitops_operator/__main__.py, version_text)
[ "$got" = "dyn-gitops-operator, version $version" ] ||
  fail "the pulled controller image says $got, expected dyn-gitops-operator, version $version"
step push "$registry/dyn-gitops/{dyn-gitops-cmp,dyn-gitops}:$version (pulled back and run)"

# 6. the chart as an OCI artifact
"$HELM" package "$REPO/charts/dyn-gitops" --destination "$work/chart" >&2
tgz="$work/chart/dyn-gitops-$version.tgz"
[ -f "$tgz" ] || fail "no $tgz"
"$HELM" push "$tgz" "oci://$registry/dyn-gitops/charts" --plain-http >"$work/push.log" 2>&1 \
  || fail "helm push: $(cat "$work/push.log")"
# the workflow signs the chart by the digest helm push prints: the same parsing here
digest=$(sed -n 's/^Digest: //p' "$work/push.log")
[[ $digest == sha256:* ]] || fail "no Digest line in helm push's output: $(cat "$work/push.log")"
step chart "oci://$registry/dyn-gitops/charts/dyn-gitops:$version@$digest"

# 7. install from the OCI chart (server-side dry-run), with the image from that registry
"$HELM" install dyn-gitops "oci://$registry/dyn-gitops/charts/dyn-gitops" --version "$version" --plain-http \
  --kubeconfig "$kubeconfig" --namespace dyn-gitops-system --create-namespace --dry-run=server \
  --set "image.repository=$registry/dyn-gitops/dyn-gitops" >"$work/install.yaml"
"$PYTHON" - "$work/install.yaml" "$registry/dyn-gitops/dyn-gitops:$version" <<'EOF' || fail "helm install output"
import sys, yaml
text, image = open(sys.argv[1]).read(), sys.argv[2]
manifest = text.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
objs = [d for d in yaml.safe_load_all(manifest) if d]
deployments = [o for o in objs if o["kind"] == "Deployment"]
assert len(deployments) == 1, [o["kind"] for o in objs]
images = [c["image"] for c in deployments[0]["spec"]["template"]["spec"]["containers"]]
assert images == [image], images
print(f"{len(objs)} objects, controller image {images[0]}", file=sys.stderr)
EOF
step install "helm install --dry-run=server from oci://$registry (kubeconfig $kubeconfig)"

printf 'rehearsal: ok %s %ss\n' "$version" "$((SECONDS - t_all))"
