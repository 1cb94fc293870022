package controller

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

// History simulation: generated histories of hand edits, releases (with
// change-set ids, some image-only), rollout undos, restarts of watcher,
// strategy switches, opt-outs, snapshot deletions and pinning toggles,
// each step settled by the real Reconciler, invariants checked after
// each settle. WATCHER_HISTORY_SEED sets the first seed (default:
// 1; "random": the time), WATCHER_HISTORIES how many histories (default 4),
// WATCHER_HISTORY_STEPS their length (default 20).

func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

// simDep is the model of one Deployment.
type simDep struct {
	name   string
	reads  []string
	pinned bool
	// revisions are the distinct templates it had, oldest first (the
	// ReplicaSets the Deployment controller keeps).
	revisions []corev1.PodTemplateSpec
	// restarts are the watcher restart ids its templates carried.
	restarts map[string]bool
	// allowance is how many watcher restarts the history allows.
	allowance int
	// undone, when set, are the pins of the template a rollout undo
	// brought back, while no source it reads changed since.
	undone *string
	evict  bool
}

type simRun struct {
	w      *hworld
	rng    *rand.Rand
	seed   int64
	deps   []*simDep
	cms    []string
	optOut map[string]bool
	policy bool
	nextID int
	value  int
	step   int
}

func (s *simRun) fail(format string, args ...any) {
	s.w.t.Helper()
	s.w.t.Errorf("seed %d, step %d: %s\nhistory:\n  %s", s.seed, s.step, fmt.Sprintf(format, args...), strings.Join(s.w.log, "\n  "))
}

func (s *simRun) names() []string {
	var out []string
	for _, d := range s.deps {
		out = append(out, d.name)
	}
	return out
}

// changedUnder ends the rollout undo of d when the change of c rolls it
// forward: c counts for d, or d's undone template pins c (a pinned source
// that floats now and changed is unpinned by a restart). An opted-out
// source the undone template does not pin leaves d on its undo.
func (s *simRun) changedUnder(d *simDep, c string) {
	if d.undone == nil {
		return
	}
	if !s.optOut[c] || pin.Parse(*d.undone)[pin.Source{Kind: pin.ConfigMap, Name: c}] != "" {
		d.undone = nil
	}
}

func (s *simRun) readers(cm string) []*simDep {
	var out []*simDep
	for _, d := range s.deps {
		for _, c := range d.reads {
			if c == cm {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// observe records every Deployment's template as a revision, and its
// watcher restart id.
func (s *simRun) observe() {
	for _, d := range s.deps {
		dep := s.w.getDep(d.name)
		tpl := *dep.Spec.Template.DeepCopy()
		if n := len(d.revisions); n == 0 || !sameTemplate(d.revisions[n-1], tpl) {
			d.revisions = append(d.revisions, tpl)
		}
		if id := tpl.Annotations[plan.RestartAnnotation]; id != "" {
			d.restarts[id] = true
		}
	}
}

func (s *simRun) fresh() string {
	s.value++
	return fmt.Sprintf("v%d", s.value)
}

func newSimRun(t *testing.T, ctx context.Context, seed int64) *simRun {
	rng := rand.New(rand.NewSource(seed))
	s := &simRun{rng: rng, seed: seed, optOut: map[string]bool{}, policy: true, nextID: 1}
	ncm := 1 + rng.Intn(3)
	ndep := 1 + rng.Intn(3)
	var objs []client.Object
	for i := 0; i < ncm; i++ {
		name := fmt.Sprintf("c%d", i)
		s.cms = append(s.cms, name)
		objs = append(objs, histConfigMap(name, s.fresh()))
	}
	var desc []string
	for i := 0; i < ndep; i++ {
		d := &simDep{name: fmt.Sprintf("d%d", i), pinned: rng.Intn(3) > 0, restarts: map[string]bool{}}
		for _, c := range s.cms {
			if rng.Intn(2) == 0 {
				d.reads = append(d.reads, c)
			}
		}
		if len(d.reads) == 0 {
			d.reads = []string{s.cms[rng.Intn(len(s.cms))]}
		}
		s.deps = append(s.deps, d)
		objs = append(objs, histDeployment(d.name, d.reads, d.pinned))
		desc = append(desc, fmt.Sprintf("%s(pinned=%v reads %v)", d.name, d.pinned, d.reads))
	}
	s.w = newWorld(t, ctx, objs)
	s.w.observe = s.observe
	s.w.logf("world: %s; ConfigMaps %v", strings.Join(desc, ", "), s.cms)
	s.settle(nil)
	return s
}

func (s *simRun) settle(changed []string) {
	s.w.t.Helper()
	if errs := s.w.settle(changed, s.names()); len(errs) > 0 {
		s.fail("did not settle: %v", errs)
	}
	s.observe()
	for _, e := range drain(s.w.rec) {
		s.w.logf("   event: %s", e)
	}
}

func (s *simRun) restartID(d *simDep) string {
	return s.w.getDep(d.name).Spec.Template.Annotations[plan.RestartAnnotation]
}

// run plays one step, settles, and checks the invariants.
func (s *simRun) run() {
	w := s.w
	type expect struct {
		d       *simDep
		restart bool // a new watcher restart id
		same    bool // the same watcher restart id
		before  string
	}
	var exp []expect
	var changed []string
	undoneBy := map[*simDep]bool{}
	w.tick()
	switch k := s.rng.Intn(20); {
	case k < 6: // a hand edit
		c := s.cms[s.rng.Intn(len(s.cms))]
		cm := w.getCM(c)
		v := s.fresh()
		cm.Data = map[string]string{"a": v}
		w.update(cm)
		changed = []string{c}
		w.logf("%d: hand edit %s = %s", s.step, c, v)
		for _, d := range s.readers(c) {
			d.allowance++
			s.changedUnder(d, c)
			if !s.optOut[c] && !d.evict {
				exp = append(exp, expect{d: d, restart: true, before: s.restartID(d)})
			}
		}
	case k < 11: // a release
		d := s.deps[s.rng.Intn(len(s.deps))]
		id := strconv.Itoa(s.nextID)
		s.nextID++
		before := s.restartID(d)
		var touched, dataChanged []string
		// A release re-applies every source of the workload (Helm applies
		// the whole chart) carrying its id; some change. verdict.InRelease
		// wants no source of another id.
		touched = append(touched, d.reads...)
		imageOnly := s.rng.Intn(3) == 0
		for _, c := range touched {
			cm := w.getCM(c)
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[optin.ChangeSet] = id
			if !imageOnly && s.rng.Intn(2) == 0 {
				cm.Data = map[string]string{"a": s.fresh()}
				dataChanged = append(dataChanged, c)
			}
			w.update(cm)
			changed = append(changed, c)
		}
		dep := w.getDep(d.name)
		if dep.Spec.Template.Annotations == nil {
			dep.Spec.Template.Annotations = map[string]string{}
		}
		dep.Spec.Template.Annotations[optin.ChangeSet] = id
		if imageOnly || s.rng.Intn(2) == 0 {
			dep.Spec.Template.Spec.Containers[0].Image = "app:" + id
		}
		w.update(dep)
		if len(dataChanged) > 0 {
			d.undone = nil // a release that changes its config supersedes its undo (verdict.InRelease repins)
		}
		w.logf("%d: release %s of %s: sources re-applied %v, data changed %v", s.step, id, d.name, touched, dataChanged)
		for _, c := range dataChanged {
			for _, o := range s.readers(c) {
				o.allowance++
				s.changedUnder(o, c)
			}
		}
		if !d.evict {
			exp = append(exp, expect{d: d, same: true, before: before})
		}
	case k < 14: // a rollout undo (kubectl rollout undo, or watcher rollback)
		d := s.deps[s.rng.Intn(len(s.deps))]
		n := len(d.revisions)
		if n < 2 {
			w.logf("%d: rollout undo %s: no older revision", s.step, d.name)
			break
		}
		dep := w.getDep(d.name)
		dep.Spec.Template = *d.revisions[n-2].DeepCopy()
		w.update(dep)
		pins := dep.Spec.Template.Annotations[pin.PinsAnnotation]
		// A revision that pins nothing reads live content: pinning it
		// again (Repin) reads the same, and the live-content check holds.
		// A revision that pins a snapshot since deleted is pinned again
		// (verdict: RolledBack wants every snapshot to exist).
		exists := true
		for _, name := range pin.Parse(pins) {
			exists = exists && w.getCM(name) != nil
		}
		d.undone = nil // the undo before it is undone too
		if pins != "" && exists {
			d.undone = &pins
		}
		undoneBy[d] = true
		d.allowance++ // the revision may pin a snapshot since deleted: repinned
		w.logf("%d: rollout undo %s to the template pinning %q", s.step, d.name, pins)
	case k < 15:
		w.logf("%d: restart of watcher", s.step)
		w.restartWatcher()
	case k < 16:
		d := s.deps[s.rng.Intn(len(s.deps))]
		dep := w.getDep(d.name)
		d.evict = !d.evict
		if d.evict {
			dep.Annotations[restart.StrategyAnnotation] = "evict"
		} else {
			delete(dep.Annotations, restart.StrategyAnnotation)
		}
		w.update(dep)
		d.allowance++
		w.logf("%d: %s strategy evict=%v", s.step, d.name, d.evict)
	case k < 17:
		c := s.cms[s.rng.Intn(len(s.cms))]
		cm := w.getCM(c)
		s.optOut[c] = !s.optOut[c]
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		if s.optOut[c] {
			cm.Annotations["require-restart"] = "false"
		} else {
			delete(cm.Annotations, "require-restart")
		}
		w.update(cm)
		changed = []string{c}
		for _, d := range s.readers(c) {
			d.allowance++
		}
		w.logf("%d: %s opted out=%v", s.step, c, s.optOut[c])
	case k < 19:
		var snaps corev1.ConfigMapList
		_ = w.api.List(w.ctx, &snaps, client.InNamespace(hns), client.MatchingLabels{pin.SnapshotLabel: "true"})
		if len(snaps.Items) == 0 {
			w.logf("%d: delete a snapshot: none", s.step)
			break
		}
		sn := snaps.Items[s.rng.Intn(len(snaps.Items))]
		if err := w.api.Delete(w.ctx, &sn); err != nil {
			w.t.Fatal(err)
		}
		for _, d := range s.deps {
			d.allowance++
			if d.undone != nil && strings.Contains(*d.undone, sn.Name) {
				d.undone = nil
			}
		}
		w.logf("%d: delete snapshot %s", s.step, sn.Name)
	default:
		s.policy = !s.policy
		w.policy(s.policy)
		for _, d := range s.deps {
			d.allowance++
		}
		w.logf("%d: pinning policy present=%v", s.step, s.policy)
	}
	s.settle(changed)
	for _, e := range exp {
		now := s.restartID(e.d)
		if e.restart && now == e.before {
			s.fail("%s: a hand edit of a source it reads did not restart it (restart id %q)", e.d.name, now)
		}
		if e.same && now != e.before {
			s.fail("%s: a release carrying the change was restarted by watcher too (restart id %q -> %q)", e.d.name, e.before, now)
		}
	}
	s.check()
}

// check verifies the invariants on the settled world.
func (s *simRun) check() {
	w := s.w
	for _, d := range s.deps {
		dep := w.getDep(d.name)
		pins := pin.Parse(dep.Spec.Template.Annotations[pin.PinsAnnotation])
		if len(d.restarts) > d.allowance {
			s.fail("%s: %d watcher restarts (%v) for a history allowing %d", d.name, len(d.restarts), sortedKeys(d.restarts), d.allowance)
		}
		if len(pins) > pin.MaxPins {
			s.fail("%s pins %d sources, more than %d", d.name, len(pins), pin.MaxPins)
		}
		// Without the admission policy pods read live content, whatever
		// the template pins; watcher leaves its pins as they are.
		if !s.policy {
			continue
		}
		for src, name := range pins {
			if strings.Count(name, "-pin-") > 1 {
				s.fail("%s pins %s to %s, a snapshot of a snapshot", d.name, src.Name, name)
			}
			if w.getCM(name) == nil {
				s.fail("%s pins %s to %s, which does not exist", d.name, src.Name, name)
			}
		}
		if d.undone != nil {
			if s.policy && !d.evict && dep.Spec.Template.Annotations[pin.PinsAnnotation] != *d.undone {
				s.fail("%s: rolled forward after a rollout undo: pins %q, the undo brought back %q",
					d.name, dep.Spec.Template.Annotations[pin.PinsAnnotation], *d.undone)
			}
			continue
		}
		// The admission policy is what makes pods read the snapshots the
		// template pins: without it new pods read live content.
		if !s.policy {
			continue
		}
		for _, c := range d.reads {
			live := w.getCM(c)
			read := live
			if name, ok := pins[pin.Source{Kind: pin.ConfigMap, Name: c}]; ok {
				read = w.getCM(name)
				if read == nil {
					continue // said above
				}
			}
			if !maps.Equal(read.Data, live.Data) {
				s.fail("%s (pinned=%v, policy=%v, evict=%v, %s opted out=%v): its newest pods read %s = %v (%s), live is %v",
					d.name, d.pinned, s.policy, d.evict, c, s.optOut[c], c, read.Data, read.Name, live.Data)
			}
		}
	}
}

func TestHistorySimulation(t *testing.T) {
	seed := envInt("WATCHER_HISTORY_SEED", 1)
	if os.Getenv("WATCHER_HISTORY_SEED") == "random" {
		seed = time.Now().UnixNano() % 1_000_000
	}
	n := envInt("WATCHER_HISTORIES", 4)
	steps := int(envInt("WATCHER_HISTORY_STEPS", 20))
	t.Logf("WATCHER_HISTORY_SEED=%d WATCHER_HISTORIES=%d WATCHER_HISTORY_STEPS=%d", seed, n, steps)
	for i := int64(0); i < n; i++ {
		ok := t.Run(fmt.Sprintf("seed=%d", seed+i), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := newSimRun(t, ctx, seed+i)
			defer s.w.stop()
			s.check()
			for s.step = 1; s.step <= steps && !t.Failed(); s.step++ {
				s.run()
			}
		})
		if !ok && os.Getenv("WATCHER_HISTORY_ALL") == "" {
			t.Logf("stopping at the first failing history; replay with WATCHER_HISTORY_SEED=%d WATCHER_HISTORIES=1", seed+i)
			return
		}
	}
}
