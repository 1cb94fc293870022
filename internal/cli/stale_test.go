package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/verdict"
)

// TestJudgeStale: which workloads are stale, why (the first reason of the
// table that holds) and since when (the oldest time known).
func TestJudgeStale(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	pendingRestart := explain.WorkloadReport{Kind: "Deployment", Namespace: "ns", Name: "web", Watched: true, Pending: true,
		Changes: []explain.Change{{Kind: "ConfigMap", Name: "app", Keys: []string{"mode"}}},
		Uses:    []explain.Use{{Kind: "ConfigMap", Name: "app", Verdict: "count"}}}
	upToDate := explain.WorkloadReport{Kind: "Deployment", Namespace: "ns", Name: "web", Watched: true,
		Uses: []explain.Use{{Kind: "ConfigMap", Name: "app", Verdict: "count"}}}
	optedOut := upToDate
	optedOut.Uses = []explain.Use{{Kind: "Secret", Name: "db", Verdict: "drop", Rule: "workload-opted-out"}}
	notWatched := pendingRestart
	notWatched.Watched, notWatched.Pending, notWatched.Excluded = false, false, "its labels do not match --workload-selector"
	onDelete := pendingRestart
	onDelete.OnDelete = "OnDelete"
	missing := upToDate
	missing.Missing = []explain.Missing{{Kind: "ConfigMap", Name: "app", Keys: []string{"mode"}}}
	ignored := upToDate
	ignored.Ignored = []explain.Change{{Kind: "ConfigMap", Name: "app", Keys: []string{"mode"}, Rule: "config-opted-out"}}
	ignored.Uses = []explain.Use{{Kind: "ConfigMap", Name: "app", Verdict: "ignore", Rule: "config-opted-out"}}
	drift := []StaleSource{{Kind: "Secret", Name: "db", Keys: []string{"password"}, Snapshot: "db-pin-1"}}
	pending := guard.Pending{Opened: t0.Add(-time.Hour), Last: t0, Sources: []guard.Source{}}.Encode("uid", func([]byte) string { return "mac" })
	// The chain (package verdict, run by explain) says rolled back; the
	// annotation alone does not: a pending restart of another source rolls
	// forward.
	leftBehind := pendingRestart
	leftBehind.Pending, leftBehind.Verdict = false, &explain.Verdict{Decided: "restart", Rule: verdict.RuleLeftByRollback, Stale: true}
	recordedRollback := upToDate
	recordedRollback.Verdict = &explain.Verdict{Decided: "none", Rule: verdict.RuleRolledBack}
	leftPinned := upToDate
	leftPinned.Uses = []explain.Use{{Kind: "Secret", Name: "db", Verdict: "count", Pin: &explain.Pin{State: explain.PinPinned, Snapshot: "db-pin-1", Live: "db-pin-2", LeftByRollback: true}}}
	inRelease := pendingRestart
	inRelease.Pending, inRelease.TemplateChangeSet = false, "8"
	inRelease.Verdict = &explain.Verdict{Decided: "restart", Rule: verdict.RuleInRelease}
	rolledBackFrom := map[string]string{pin.RolledBackFrom: "secret/db=db-pin-2"}
	window := &v1alpha1.PendingRestart{Kind: "Deployment", Name: "web", Since: metav1.NewTime(t0.Add(-2 * time.Hour)), Reason: "MaintenanceWindow"}

	tests := []struct {
		name   string
		f      staleFacts
		why    string // "": not stale
		detail string
		since  time.Time
		srcs   string
	}{
		{"up to date", staleFacts{report: upToDate}, "", "", time.Time{}, ""},
		{"a restart due", staleFacts{report: pendingRestart, written: map[string]time.Time{"ConfigMap/app": t0}}, whyNotYet, "--dry-run", t0, "ConfigMap/app:mode"},
		{"rolled back, not rolled forward", staleFacts{report: leftBehind, drift: drift, annotations: rolledBackFrom},
			whyRolledBack, "a rollback left secret/db=db-pin-2", time.Time{}, "ConfigMap/app:mode Secret/db:password@db-pin-1"},
		{"rolled back, another source changed", staleFacts{report: pendingRestart, drift: drift, annotations: rolledBackFrom},
			whyNotYet, "--dry-run", time.Time{}, "ConfigMap/app:mode Secret/db:password@db-pin-1"},
		{"a rollback recorded", staleFacts{report: recordedRollback, drift: drift},
			whyRolledBack, "records the rollback", time.Time{}, "Secret/db:password@db-pin-1"},
		{"rolled back, its content left", staleFacts{report: leftPinned, drift: drift, annotations: rolledBackFrom},
			whyRolledBack, "a rollback left secret/db=db-pin-2", time.Time{}, "Secret/db:password@db-pin-1"},
		{"pinned, drifted, not by a rollback", staleFacts{report: upToDate, drift: drift},
			whyNotYet, "--dry-run", time.Time{}, "Secret/db:password@db-pin-1"},
		{"in release", staleFacts{report: inRelease},
			whyInRelease, "change set 8", time.Time{}, "ConfigMap/app:mode"},
		{"not watched, pinned", staleFacts{report: notWatched, drift: drift}, whyNotWatched, "--workload-selector", time.Time{}, "Secret/db:password@db-pin-1"},
		{"opted out, pinned", staleFacts{report: optedOut, drift: drift}, whyOptedOut, "rule workload-opted-out", time.Time{}, "Secret/db:password@db-pin-1"},
		{"a change ignored", staleFacts{report: ignored}, whyOptedOut, "rule config-opted-out", time.Time{}, "ConfigMap/app:mode"},
		{"a change set", staleFacts{report: pendingRestart, annotations: map[string]string{guard.PendingAnnotation: pending}, written: map[string]time.Time{"ConfigMap/app": t0}},
			whyHeld, "change set waits since 2026-11-27T19:00:00Z", t0.Add(-time.Hour), "ConfigMap/app:mode"},
		{"a maintenance window", staleFacts{report: pendingRestart, policy: window, policyName: "p"}, whyHeld, "ReloadPolicy p: MaintenanceWindow", t0.Add(-2 * time.Hour), "ConfigMap/app:mode"},
		{"a key missing", staleFacts{report: missing}, whyHeld, "missing", time.Time{}, "ConfigMap/app:"},
		{"failed", staleFacts{report: pendingRestart, failed: "its last rollout failed (ProgressDeadlineExceeded)"}, whyFailed, "ProgressDeadlineExceeded", time.Time{}, "ConfigMap/app:mode"},
		{"OnDelete", staleFacts{report: onDelete}, whyOnDelete, "deleted (OnDelete)", time.Time{}, "ConfigMap/app:mode"},
	}
	for _, tt := range tests {
		got, stale := judgeStale(tt.f)
		if stale != (tt.why != "") {
			t.Errorf("%s: stale %v, want %v", tt.name, stale, tt.why != "")
			continue
		}
		if !stale {
			continue
		}
		var srcs []string
		for _, s := range got.Sources {
			v := s.Kind + "/" + s.Name + ":" + strings.Join(s.Keys, ",")
			if s.Snapshot != "" {
				v += "@" + s.Snapshot
			}
			srcs = append(srcs, v)
		}
		if got.Why != tt.why || !strings.Contains(got.Detail, tt.detail) || strings.Join(srcs, " ") != tt.srcs {
			t.Errorf("%s: %q %q %v; want %q %q %v", tt.name, got.Why, got.Detail, srcs, tt.why, tt.detail, tt.srcs)
		}
		switch {
		case tt.since.IsZero() && got.Since != nil:
			t.Errorf("%s: since %v, want none", tt.name, got.Since)
		case !tt.since.IsZero() && (got.Since == nil || !got.Since.Equal(tt.since)):
			t.Errorf("%s: since %v, want %v", tt.name, got.Since, tt.since)
		}
	}
}
