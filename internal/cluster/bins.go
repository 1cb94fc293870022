package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
)

// binScript builds the control-plane binaries, relative to the repository root.
const binScript = "hack/controlplane-bins.sh"

// findBinDir returns dir if set, or else runs binScript, which builds any
// binary that is missing (progress on our stderr) and prints its folder.
func findBinDir(ctx context.Context, dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("find control-plane binaries: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("Finding control-plane binaries", "script", binScript)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, binScript))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	// Cancel the go builds the script runs too, not just bash.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("run %s: %w", binScript, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir = strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("run %s: it printed no folder", binScript)
	}
	return dir, nil
}

// repoRoot walks up from the working directory to the folder with go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
