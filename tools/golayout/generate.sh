#!/usr/bin/env bash
# Regenerates dyn_gitops/workerhash/golayout.py: how Go's encoding/json lays out the
# v1beta1 DynamoComponentDeploymentSpec and every type it reaches (field order, omitempty,
# omitzero, custom marshalers), read by reflection from the operator's own types.
#   tools/golayout/generate.sh /path/to/dynamo/deploy/operator   (the release being reproduced)
# Needs Go and the Go module proxy; the output is committed and reviewed like code.
set -euo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/main.go" "$work/"
cp "$src/go.sum" "$work/"
cat > "$work/go.mod" <<MOD
module golayout

go 1.26

require github.com/ai-dynamo/dynamo/deploy/operator v0.0.0

replace github.com/ai-dynamo/dynamo/deploy/operator => $src
MOD
(cd "$work" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 && GOFLAGS=-mod=mod go run .) > "$work/layout.json"
python3 "$here/to_python.py" "$work/layout.json" > "$repo/dyn_gitops/workerhash/golayout.py"
echo "wrote dyn_gitops/workerhash/golayout.py"
