#!/usr/bin/env bash
# The compatibility matrix (issue 28; the contract's "Versions"): the root
# module against each k8s.io/apimachinery minor, the typed forms against
# client-go's generated clients, ctrlretry against each controller-runtime
# minor, and a user's module adding the library without any version moving
# up. The committed go.mod files are never modified: each cell works on a
# copy (-modfile) or on a module made in a temporary directory.
#
#   compat/compat.sh [GROUP|CELL]...   (no argument: all)
#
# GROUP: all, edges (the floor and the newest of each kind, the oldest Go
# and the user cells: what CI runs), root, typed, ctrlretry, go, user.
# CELL: root@VERSION (apimachinery), typed@VERSION (client-go),
# ctrlretry@VERSION (controller-runtime), go@VERSION (the root and ctrlretry
# at their go.mod's floors, built, vetted and tested by that Go release,
# which the go command fetches from the module proxy),
# user@client-go@VERSION, user@controller-runtime@VERSION.
#
#   compat/compat.sh pins    which pinned versions are no longer the newest
#                            patch of their minor on the module proxy, and
#                            whether a newer minor is out
#
# Each cell prints one line: its name, ok or FAIL, its time and the versions
# it selected; a failure also prints the end of its log, and the script
# exits 1. The newest cells need the Go their modules say (1.26 from
# apimachinery v0.36 and controller-runtime v0.24 on): an older go command
# fetches it from the module proxy, unless GOTOOLCHAIN=local.
# Environment: GO (default go), COMPAT_TESTFLAGS (default -count=1),
# COMPAT_KEEP=1 keeps the temporary directories.
set -euo pipefail

# Pinned, newest patch of each minor on the module proxy when last updated
# (compat/compat.sh pins says which have a newer one): the same input gives
# the same matrix, whatever the proxy serves later.
APIMACHINERY=(v0.31.14 v0.32.13 v0.33.13 v0.34.13 v0.35.10 v0.36.6 v0.37.2)
CLIENT_GO=(v0.31.14 v0.37.2)
CONTROLLER_RUNTIME=(v0.19.4 v0.20.4 v0.21.0 v0.22.5 v0.23.3 v0.24.1 v0.25.3)
# The oldest Go the go directives allow, newest patch (newer Go releases:
# the one that runs make check).
GO_RELEASES=(1.22.12)
# A user's module: the first release of a minor, as a controller a year or
# two behind has it (with client-go alone, and with controller-runtime).
USERS=(client-go@v0.31.0 client-go@v0.33.0 controller-runtime@v0.19.0 controller-runtime@v0.21.0)

GO=${GO:-go}
TESTFLAGS=${COMPAT_TESTFLAGS:--count=1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export GOWORK=off

if [ -n "${COMPAT_WORK:-}" ]; then
	WORK=$COMPAT_WORK # a cell, run in the loop's directory
else
	WORK=$(mktemp -d)
	if [ "${COMPAT_KEEP:-}" = 1 ]; then
		echo "compat: temporary files in $WORK"
	else
		trap 'rm -rf "$WORK"' EXIT
	fi
fi

# modfile_copy DIR: a copy of DIR's go.mod and go.sum in a new directory,
# its path printed.
modfile_copy() {
	local d
	d=$(mktemp -d "$WORK/mod.XXXXXX")
	cp "$1/go.mod" "$d/go.mod"
	[ ! -f "$1/go.sum" ] || cp "$1/go.sum" "$d/go.sum"
	echo "$d"
}

# versions MODFILE PATH...: each module's selected version.
versions() {
	local mf=$1
	shift
	$GO list -modfile="$mf" -m -f '{{.Path}} {{.Version}}' "$@" | tr '\n' ' '
}

# check_with DIR REPLACE MODULE@VERSION SHOWN...: the module in DIR on a
# copy of its go.mod with MODULE at VERSION (and the root module replaced
# by the checkout unless REPLACE is "no"), tidied, the SHOWN modules'
# selected versions printed, then built, vetted and tested.
check_with() {
	local dir=$1 replace=$2 pin=$3 d
	shift 3
	d=$(modfile_copy "$dir")
	cd "$dir"
	[ "$replace" = no ] || $GO mod edit -replace="github.com/kuberetry/retry=$ROOT" "$d/go.mod"
	$GO get -modfile="$d/go.mod" "$pin"
	$GO mod tidy -modfile="$d/go.mod"
	echo "selected: $(versions "$d/go.mod" "$@")"
	$GO build -modfile="$d/go.mod" ./...
	$GO vet -modfile="$d/go.mod" ./...
	# shellcheck disable=SC2086
	$GO test -modfile="$d/go.mod" $TESTFLAGS ./...
}

cell_root() { # apimachinery version
	check_with "$ROOT" no "k8s.io/apimachinery@$1" k8s.io/apimachinery k8s.io/utils
}

cell_typed() { # client-go version
	check_with "$ROOT/compat/typed" replace "k8s.io/client-go@$1" k8s.io/client-go k8s.io/apimachinery
}

cell_ctrlretry() { # controller-runtime version (the replace is what ctrlretry/go.work does)
	check_with "$ROOT/ctrlretry" replace "sigs.k8s.io/controller-runtime@$1" \
		sigs.k8s.io/controller-runtime k8s.io/client-go k8s.io/apimachinery
}

cell_go() { # Go release
	export GOTOOLCHAIN="go$1"
	cd "$ROOT"
	$GO version
	$GO build ./...
	$GO vet ./...
	# shellcheck disable=SC2086
	$GO test $TESTFLAGS ./...
	cd "$ROOT/ctrlretry"
	# What ctrlretry/go.work does, on a copy: go.work needs Go 1.22+ too,
	# but the copy keeps the cell to ctrlretry's own go.mod.
	local d
	d=$(modfile_copy "$ROOT/ctrlretry")
	$GO mod edit -replace="github.com/kuberetry/retry=$ROOT" "$d/go.mod"
	$GO mod tidy -modfile="$d/go.mod"
	$GO build -modfile="$d/go.mod" ./...
	$GO vet -modfile="$d/go.mod" ./...
	# shellcheck disable=SC2086
	$GO test -modfile="$d/go.mod" $TESTFLAGS ./...
}

# go_directive MODULE@VERSION: the go directive of that version's go.mod.
go_directive() {
	local gomod
	gomod=$($GO mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod"
}

# build_list: every module of the build list with its version, the go and
# toolchain directives, one a line.
build_list() {
	$GO list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | sed '/^$/d'
	sed -n 's/^\(go\|toolchain\) /\1 /p' go.mod
}

cell_user() { # client-go@VERSION or controller-runtime@VERSION
	local mod=${1%@*} version=${1##*@} d path
	d=$(mktemp -d "$WORK/user.XXXXXX")
	cd "$d"
	case $mod in
	client-go) path=k8s.io/client-go ;;
	controller-runtime) path=sigs.k8s.io/controller-runtime ;;
	*) echo "unknown user module $mod" >&2; return 1 ;;
	esac
	$GO mod init example.com/controller
	# A module made for that library: its go directive as the library says.
	$GO mod edit -go="$(go_directive "$path@$version")"
	$GO get "$path@$version"
	# The user's controller before the library: a read through a typed client.
	cat >main.go <<'EOF'
package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:6443"})
	cm, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), "cm", metav1.GetOptions{})
	fmt.Println(cm, err)
	write(cs)
}
EOF
	echo 'package main

import "k8s.io/client-go/kubernetes"

func write(kubernetes.Interface) {}' >write.go
	if [ "$mod" = controller-runtime ]; then
		cat >ctrl.go <<'EOF'
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func init() {
	c, err := client.New(nil, client.Options{})
	if err == nil {
		var cm corev1.ConfigMap
		err = c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "cm"}, &cm)
	}
	fmt.Println(err)
}
EOF
	fi
	$GO mod tidy
	$GO build -o /dev/null .
	build_list >before.txt

	# The library added, as the unpublished module must be: a replace to
	# the checkout, then go mod tidy.
	$GO mod edit -replace="github.com/kuberetry/retry=$ROOT"
	cat >write.go <<'EOF'
package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry"
)

func write(cs kubernetes.Interface) {
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}}
	_, _, _ = retry.Ensure(ctx, retry.DefaultRetry, cms, cm, func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"k": "v"}
		return nil
	})
	_, _ = retry.Update(ctx, retry.DefaultRetry, cms, cm, func(cm *corev1.ConfigMap) error {
		cm.Data["k"] = "w"
		return nil
	})
}
EOF
	if [ "$mod" = controller-runtime ]; then
		$GO mod edit -replace="github.com/kuberetry/retry/ctrlretry=$ROOT/ctrlretry"
		cat >ctrl.go <<'EOF'
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kuberetry/retry/ctrlretry"
)

func init() {
	c, err := client.New(nil, client.Options{})
	if err == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}}
		_, err = ctrlretry.CreateOrUpdate(context.Background(), c, cm, func() error {
			cm.Data = map[string]string{"k": "v"}
			return nil
		})
	}
	fmt.Println(err)
}
EOF
	fi
	$GO mod tidy
	$GO build -o /dev/null .
	$GO vet .
	build_list >after.txt

	# Every k8s.io and sigs.k8s.io module of the build list before, and the
	# go and toolchain directives, are in the one after at the same version.
	# Other modules may move up where apimachinery v0.31.0 requires a newer
	# one (go-spew, gofuzz): listed, not counted as a failure.
	local moved kept
	moved=$(awk 'NR == FNR { after[$1] = $2; next } !($1 in after) { print $1 " " $2 " -> gone"; next } after[$1] != $2 { print $1 " " $2 " -> " after[$1] }' after.txt before.txt)
	kept=$(grep -cE '^((go|toolchain) |k8s\.io/|sigs\.k8s\.io/)' before.txt)
	echo "checked: $kept k8s.io modules and directives ($(grep -E '^(go|k8s\.io/client-go|sigs\.k8s\.io/controller-runtime) ' after.txt | tr '\n' ' '))"
	echo "added: $(awk 'NR == FNR { before[$1] = 1; next } !($1 in before) { printf "%s ", $1 }' before.txt after.txt)"
	echo "other modules moved: $(grep -vE '^((go|toolchain) |k8s\.io/|sigs\.k8s\.io/)' <<<"$moved" | tr '\n' ';')"
	if grep -E '^((go|toolchain) |k8s\.io/|sigs\.k8s\.io/)' <<<"$moved"; then
		echo "moved (above): a k8s.io module or a directive"
		return 1
	fi
}

# pins: each pinned minor against the newest patch the proxy serves.
pins() {
	local stale=0 path v minor newest
	for spec in "k8s.io/apimachinery ${APIMACHINERY[*]}" "k8s.io/client-go ${CLIENT_GO[*]}" \
		"sigs.k8s.io/controller-runtime ${CONTROLLER_RUNTIME[*]}"; do
		read -r path vs <<<"$spec"
		all=$(cd "$WORK" && $GO list -m -versions "$path")
		for v in $vs; do
			minor=${v%.*}
			newest=$(tr ' ' '\n' <<<"$all" | grep -E "^${minor//./\\.}\.[0-9]+$" | sort -t. -k3,3n | tail -n1)
			if [ "$newest" = "$v" ]; then
				echo "$path $v: newest"
			else
				echo "$path $v: $newest is out"
				stale=1
			fi
		done
		newest=$(tr ' ' '\n' <<<"$all" | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -t. -k2,2n -k3,3n | tail -n1)
		if [ "${newest%.*}" != "$minor" ]; then
			echo "$path: a newer minor is out, $newest"
			stale=1
		fi
	done
	return $stale
}

cells=()
add_group() {
	local v
	case $1 in
	root) for v in "${APIMACHINERY[@]}"; do cells+=("root@$v"); done ;;
	typed) for v in "${CLIENT_GO[@]}"; do cells+=("typed@$v"); done ;;
	ctrlretry) for v in "${CONTROLLER_RUNTIME[@]}"; do cells+=("ctrlretry@$v"); done ;;
	go) for v in "${GO_RELEASES[@]}"; do cells+=("go@$v"); done ;;
	user) for v in "${USERS[@]}"; do cells+=("user@$v"); done ;;
	all) add_group root; add_group typed; add_group ctrlretry; add_group go; add_group user ;;
	edges)
		cells+=("root@${APIMACHINERY[0]}" "root@${APIMACHINERY[-1]}")
		cells+=("typed@${CLIENT_GO[0]}" "typed@${CLIENT_GO[-1]}")
		cells+=("ctrlretry@${CONTROLLER_RUNTIME[0]}" "ctrlretry@${CONTROLLER_RUNTIME[-1]}")
		cells+=("go@${GO_RELEASES[0]}")
		add_group user
		;;
	*@*) cells+=("$1") ;;
	*) echo "compat: unknown group or cell $1" >&2; exit 2 ;;
	esac
}

case ${1:-} in
pins)
	pins
	exit
	;;
__cell) # one cell, run by the loop below in its own shell so that set -e holds
	kind=${2%%@*}
	"cell_$kind" "${2#*@}"
	exit
	;;
esac
[ $# -gt 0 ] || set -- all
for arg in "$@"; do add_group "$arg"; done

failed=()
start=$SECONDS
for cell in "${cells[@]}"; do
	kind=${cell%%@*}
	log="$WORK/$(tr '/@' '__' <<<"$cell").log"
	t0=$SECONDS
	case $kind in
	root | typed | ctrlretry | go | user) ;;
	*) echo "compat: unknown cell $cell" >&2; exit 2 ;;
	esac
	if COMPAT_WORK="$WORK" "$0" __cell "$cell" >"$log" 2>&1; then
		printf '%-38s ok    %4ds  %s\n' "$cell" $((SECONDS - t0)) "$(sed -n 's/^\(selected\|checked\): //p; s/^go version //p' "$log" | head -n1)"
	else
		printf '%-38s FAIL  %4ds\n' "$cell" $((SECONDS - t0))
		grep -v '^go: downloading' "$log" | tail -n 40 | sed 's/^/    /'
		failed+=("$cell")
	fi
done
echo "compat: ${#cells[@]} cells in $((SECONDS - start))s, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
