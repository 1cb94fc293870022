package cluster

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// podReadyStage replaces kwok's fast pod-ready stage: the same, with a
// delay read from the pod annotation ReadyDelayAnnotation.
//
//go:embed stages/pod-ready.yaml
var podReadyStage []byte

// ReadyDelayAnnotation, on a pod template, makes kwok mark its pods Ready
// that long (a Go duration such as "3s") after they are scheduled, so that
// a rollout takes time, as on a real cluster.
const ReadyDelayAnnotation = "kwok.watcher.dev/ready-delay"

// stageConfigs returns the stage configs kwok runs with: those of the cache,
// with pod-ready.yaml replaced by podReadyStage, written into dir.
func stageConfigs(cached []string, dir string) ([]string, error) {
	own := filepath.Join(dir, "pod-ready.yaml")
	if err := os.WriteFile(own, podReadyStage, 0o600); err != nil {
		return nil, fmt.Errorf("write kwok stage: %w", err)
	}
	out := []string{own}
	for _, s := range cached {
		if filepath.Base(s) != "pod-ready.yaml" {
			out = append(out, s)
		}
	}
	return out, nil
}
