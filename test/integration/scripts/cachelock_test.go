package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// hack is the folder of the scripts, from this package's folder.
var hack = filepath.Join("..", "..", "..", "hack")

// stubGo stands for the go command in the scripts' PATH: a build waits a
// little (long enough for a second run to start meanwhile), then writes
// an executable, and every build, install and download is logged.
const stubGo = `#!/bin/sh
set -eu
echo "$*" >>"$STUB_LOG"
case "$1" in
build)
	out= ver=
	while [ $# -gt 0 ]; do
		if [ "$1" = -o ]; then out=$2; fi
		case "$1" in *gitVersion=*) ver=${1#*gitVersion=}; ver=${ver%% *} ;; esac
		shift
	done
	sleep 0.3
	# A Kubernetes binary says the version stamped in its ldflags.
	printf '#!/bin/sh\necho "Kubernetes %s"\n' "$ver" >"$out"
	chmod +x "$out"
	;;
install)
	mkdir -p "$GOBIN"
	printf '#!/bin/sh\n' >"$GOBIN/kwok"
	chmod +x "$GOBIN/kwok"
	;;
mod)
	src=$STUB_DIR/module
	mkdir -p "$src/kustomize/stage/node/fast" "$src/kustomize/stage/pod/fast"
	for f in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
		echo "kind: Stage" >"$src/kustomize/stage/$f.yaml"
	done
	printf '{\n\t"Dir": "%s",\n}\n' "$src"
	;;
esac
`

// TestScriptsBuildOnceAtOnce: two runs at once of a script that builds
// into an empty cache (two make commands started together on a fresh
// machine) build each binary once, and both print the folder that holds
// them all; a third, warm, builds nothing.
func TestScriptsBuildOnceAtOnce(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock: cache_lock locks nothing here")
	}
	for _, tt := range []struct {
		script string
		builds int // go commands a cold run sends
	}{
		{"controlplane-bins.sh", 7}, // 5 builds, kwok's install, the download of its stages
		{"helm.sh", 1},
	} {
		t.Run(tt.script, func(t *testing.T) {
			stub, cache := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(stub, "go"), []byte(stubGo), 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(stub, "log")
			run := func() (string, error) {
				cmd := exec.Command("bash", filepath.Join(hack, tt.script))
				cmd.Env = append(os.Environ(), "WATCHER_CACHE="+cache, "STUB_LOG="+log, "STUB_DIR="+stub,
					"PATH="+stub+string(os.PathListSeparator)+os.Getenv("PATH"))
				out, err := cmd.Output()
				if ee, ok := err.(*exec.ExitError); ok {
					t.Logf("%s: %s", tt.script, ee.Stderr)
				}
				return strings.TrimSpace(string(out)), err
			}
			var wg sync.WaitGroup
			outs := make([]string, 2)
			for i := range outs {
				wg.Go(func() {
					var err error
					if outs[i], err = run(); err != nil {
						t.Errorf("run %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			if outs[0] != outs[1] || outs[0] == "" {
				t.Fatalf("the two runs printed %q and %q", outs[0], outs[1])
			}
			if n := logged(t, log); n != tt.builds {
				t.Errorf("two runs at once sent %d go commands, want %d (each build once)", n, tt.builds)
			}
			if _, err := run(); err != nil {
				t.Fatal(err)
			}
			if n := logged(t, log); n != tt.builds {
				t.Errorf("a warm run built again: %d go commands in all", n)
			}
		})
	}
}

// logged returns how many go commands the stub logged.
func logged(t *testing.T, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
