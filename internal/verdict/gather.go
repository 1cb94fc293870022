package verdict

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Gather returns the facts of the workload obj whose decision's input is
// in (its references, record and objects, as the caller read them):
// everything but what only the caller can know of pinning (Pinning.On,
// Missing, PinnedBefore). wanted says a ReloadPolicy that applies to it
// asks for pinning; evicts, that its restart strategy does not write
// the pod template. The controller and the CLI both build their facts
// here.
func Gather(obj client.Object, in plan.Input, wanted, evicts bool) Facts {
	ann := optin.Of(obj)
	return Facts{Annotations: ann, Recorded: in.Recorded, Version: in.Version, Sources: SourcesOf(obj, in),
		Pin: Pinning{Wanted: pin.Wanted(ann) || wanted, Evicts: evicts, Template: optin.TemplatePins(ann),
			Revision: slim.Labels(obj).Get(pin.RevisionLabel), From: pin.Parse(ann[pin.RolledBackFrom])}}
}

// SourcesOf returns the facts of the ConfigMaps and Secrets of in, the
// input of the workload obj: which its pod spec reads, which are
// snapshots, which float (pin.Floats on their annotations, or the rules
// of in do not count their changes).
func SourcesOf(obj client.Object, in plan.Input) map[string]Source {
	read := map[string]bool{}
	if podRefs, err := workload.Refs(obj); err == nil {
		for _, ref := range podRefs {
			read[ref.ID()] = true
		}
	}
	out := make(map[string]Source, len(in.Refs))
	for _, ref := range in.Refs {
		src, ok := pin.SourceOf(string(ref.Kind), ref.Name)
		if !ok {
			continue
		}
		cfg := in.Configs[ref.ID()]
		s := Source{Present: cfg.Present, Version: cfg.Version, ChangeSet: optin.ChangeSetOf(cfg.Annotations),
			IsSnapshot: cfg.Labels[pin.SnapshotLabel] == "true", PodSpec: read[ref.ID()],
			Floats: pin.Floats(src.Kind, cfg.Type, cfg.Annotations)}
		if cfg.Sum != "" {
			s.Sum, s.Snapshot = cfg.Sum, pin.SnapshotName(src.Name, cfg.Sum)
		}
		s.Release = cfg.Annotations[guard.ReleaseAnnotation]
		if v, rule := in.Rules.Evaluate(in, ref); s.Floats == "" && v != plan.Count {
			s.Floats = "its changes restart nothing (" + rule + ")"
		}
		out[ref.ID()] = s
	}
	return out
}

// Completed returns p with what only the caller can read: on, whether the
// installation pins this workload now; missing, the snapshots its
// template pins that do not exist; pinnedBefore, whether a revision of
// it is pinned. Each is kept only where the rules read it, the same for
// every caller: the controller (snapshot.Pinner.Facts) and the CLI.
func (p Pinning) Completed(on bool, missing []string, pinnedBefore bool) Pinning {
	if !on {
		return p
	}
	p.On, p.Missing = true, missing
	p.PinnedBefore = p.NeedsPinnedBefore() && pinnedBefore
	return p
}

// NeedsPinnedBefore reports whether the rules read PinnedBefore for p: a
// workload that pins, by template writes, with neither pins nor a
// revision label (a replace, or never pinned).
func (p Pinning) NeedsPinnedBefore() bool {
	return p.Wanted && !p.Evicts && len(p.Template) == 0 && p.Revision == ""
}
