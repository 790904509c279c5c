#!/bin/sh
# stall_at.sh COMMIT [ROUNDS [TIMES]] runs BenchmarkStall (stall_test.go) against the
# library as it was at COMMIT, for a before/after comparison on one machine:
# the library at COMMIT is checked out into a temporary git worktree, and
# stall_test.go is built there in a throwaway module with the few helpers it
# needs. Each round is one fresh process at -cpu 1 and one at -cpu 2, with
# -benchtime=TIMESx (default 7: each sample the median of 7 large calls), as
# bench/cmd/report runs it. The output goes to stdout.
#
#	cd bench && ./stall_at.sh fe4a275 4 5 > results/stall-before.txt
#
# fe4a275 is the last commit with one lock for the whole hierarchy, before
# cascades in batches (#14).
set -eu
commit=$1
rounds=${2:-6}
times=${3:-7}
bench=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$bench" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$tmp/lib" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

git -C "$repo" worktree add --detach "$tmp/lib" "$commit" >/dev/null 2>&1
mkdir "$tmp/mod"
cp "$bench/stall_test.go" "$tmp/mod/"
cat >"$tmp/mod/helpers_test.go" <<'EOF'
package bench

import (
	"runtime"
	"time"
)

const (
	million = 1_000_000
	farMin  = 30 * time.Second
)

func noop()   {}
func settle() { runtime.GC() }
EOF
clockVersion=$(cd "$bench" && go list -m -f '{{.Version}}' github.com/benbjohnson/clock)
cat >"$tmp/mod/go.mod" <<EOF
module stallat

go 1.25.0

require (
	github.com/benbjohnson/clock $clockVersion
	github.com/timingwheel/timingwheel v0.0.0
)

replace github.com/timingwheel/timingwheel => $tmp/lib
EOF
cp "$bench/go.sum" "$tmp/mod/go.sum"
cd "$tmp/mod"
go mod tidy >/dev/null 2>&1
echo "# $(git -C "$tmp/lib" rev-parse --short HEAD), $rounds rounds"
for _ in $(seq "$rounds"); do
	for cpu in 1 2; do
		GOMAXPROCS=2 go test -run='^$' -bench='^BenchmarkStall$' -cpu=$cpu -count=1 -timeout=60m -benchtime=${times}x . | grep '^Benchmark'
	done
done
