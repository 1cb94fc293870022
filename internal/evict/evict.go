// Package evict decides a restart that leaves the pod template alone: the
// workload's pods are replaced by evicting them through the Eviction API
// (policy/v1), so that the API server itself honours their
// PodDisruptionBudgets, a few at a time, each next eviction only once the
// replacements are Ready.
//
// The progress is level-triggered: it is derived, at every step, from the
// pods as they are (listed by the workload's selector in its namespace,
// kept only if the workload owns them) and the time of the restart,
// recorded on the workload's metadata, never its template: the API
// server's time of the restart's write (ServerTime: the managedFields
// entry of FieldManager, the only writer of restarts by eviction), to the
// second, so that watcher's own clock, skewed or jumping, never decides
// which pods are old (the "at" of watcher's signed restart state,
// guard.StateAnnotation, only for a restart written before). A pod created
// before that time is old and is to be replaced; a pod created at or after
// it is a replacement and is never evicted. So a restart of watcher, or a
// lease handover, in the middle of a restart continues where it was, and
// never evicts a pod twice.
//
// A restart that cannot finish (replacements never Ready, a budget that
// allows nothing, rights watcher lacks) costs bounded work: Tracker spaces
// the looks at it from seconds to minutes and ends them at the rollout
// timeout, and DoneAnnotation records on the workload the restarts seen
// done, so that a new process knows, from its cache alone, which restarts
// past their timeout failed.
//
// Next is the pure decision; the package's other functions gather its
// input (Pods, Owned, Allowance, FromPod, ServerTime) and carry it out
// (Evict, Blocked, ForbiddenError); Tracker and DoneMark keep its
// progress, and Progress.Step, at each look the controller asks for,
// does all of these in turn.
package evict

import (
	"cmp"
	"slices"
	"time"
)

// Order is the order in which the old pods of a workload are evicted.
type Order int

const (
	// Oldest evicts the oldest pod first (Deployments, Argo Rollouts).
	Oldest Order = iota
	// HighestOrdinal evicts the pod of the highest ordinal first, as a
	// StatefulSet rolls.
	HighestOrdinal
	// ByNode evicts pods by node name, one node after the other, as a
	// DaemonSet rolls.
	ByNode
)

// Pod is what the decision knows of one pod of the workload.
type Pod struct {
	Name string
	// Created is when the pod was created.
	Created time.Time
	// Ready: its Ready condition is True.
	Ready bool
	// Terminating: it has a deletion timestamp (evicted, or deleted).
	Terminating bool
	// Ordinal is the pod's StatefulSet ordinal; -1 for none.
	Ordinal int
	// Node is the node the pod runs on.
	Node string
}

// Input is what Next decides from.
type Input struct {
	// Pods are the workload's pods, and only its own.
	Pods []Pod
	// At is the time of the restart: the pods created before it are old.
	At time.Time
	// Want is how many pods the workload wants (its replicas, or for a
	// DaemonSet the nodes it is scheduled on).
	Want int
	// Allowance is how many of its pods the workload may have unavailable
	// at once (Allowance); less than 1 counts as 1.
	Allowance int
	// Order is the order of the evictions.
	Order Order
}

// Decision is what Next decides.
type Decision struct {
	// Evict are the pods to evict now, in order; none while waiting.
	Evict []string
	// Old is how many pods created before the restart remain, terminating
	// ones included.
	Old int
	// Done: every pod was created after the restart, and as many as the
	// workload wants are Ready.
	Done bool
}

// Next decides the next evictions of a restart at in.At:
//
//	pods                                             decision
//	no old pod, Want pods Ready                      done
//	no old pod, fewer Ready                          wait (replacements start)
//	an old pod not Ready, not terminating            evict it (it adds no
//	                                                 unavailability), then
//	Ready old pods up to the allowance below
//	unavailable < Allowance                          evict Allowance-unavailable
//	                                                 Ready old pods, in Order
//	unavailable >= Allowance                         wait
//
// unavailable is Want minus the pods that are Ready and not terminating: an
// evicted pod counts until its replacement is Ready, so each next eviction
// waits for the replacement. An old pod already terminating is never
// evicted again; a pod created at or after in.At (the times have whole
// seconds) is a replacement, and is never evicted.
func Next(in Input) Decision {
	allowance := max(in.Allowance, 1)
	var old []Pod
	ready := 0
	for _, p := range in.Pods {
		if p.Created.Before(in.At) {
			old = append(old, p) // terminating too, for Old and Done
		}
		if p.Ready && !p.Terminating {
			ready++
		}
	}
	d := Decision{Old: len(old)}
	if len(old) == 0 {
		d.Done = ready >= in.Want
		return d
	}
	var unready, candidates []Pod
	for _, p := range old {
		switch {
		case p.Terminating:
		case !p.Ready:
			unready = append(unready, p)
		default:
			candidates = append(candidates, p)
		}
	}
	sortPods(unready, in.Order)
	sortPods(candidates, in.Order)
	for _, p := range unready {
		d.Evict = append(d.Evict, p.Name)
	}
	room := allowance - max(in.Want-ready, 0)
	for _, p := range candidates {
		if room <= 0 {
			break
		}
		d.Evict = append(d.Evict, p.Name)
		room--
	}
	return d
}

// sortPods sorts pods in the order o, stably, names last.
func sortPods(pods []Pod, o Order) {
	slices.SortStableFunc(pods, func(a, b Pod) int {
		var c int
		switch o {
		case HighestOrdinal:
			c = cmp.Compare(b.Ordinal, a.Ordinal)
		case ByNode:
			c = cmp.Compare(a.Node, b.Node)
		default:
			c = a.Created.Compare(b.Created)
		}
		return cmp.Or(c, cmp.Compare(a.Name, b.Name))
	})
}
