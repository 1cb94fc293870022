// Package gather reads what plan.Decide needs of a workload, for both
// front doors: the controller, from its store, and the explain command,
// from the objects it read. Reading a record, building the decision's
// input (the SecretProviderClasses mounted included) and asking what a
// change of one object does are here once, so that what explain says is
// what the controller decides (a property test holds them equal).
//
//	step                    controller              explain
//	the record (Record)     the workload's          the workload's
//	                        annotations             annotations
//	the input (Input)       references resolved     references resolved
//	                        from the store          from the objects read
//	SecretProviderClasses   the versions mounted    none read: those recorded
//	  (Mounted)             (package csi)           count as unchanged
//	a change (Change)       decided when it comes   decided on the changed
//	                                                hash, key by key
package gather

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Options are the installation's settings that go into every input.
type Options struct {
	// Rules say which references count (plan.NewChain).
	Rules plan.Chain
	// RestartOnCreate and ReloadOnDelete: see plan.Input.
	RestartOnCreate, ReloadOnDelete bool
}

// Input returns the input of plan.Decide for the workload obj, whose
// references are uses and whose ReloadPolicies name the references named
// (policy.Applied.Named): the record and the state of each object are the
// caller's to add (Record, Configs).
func Input(o Options, obj client.Object, uses []refs.Ref, named map[string]bool) plan.Input {
	kind, _ := workload.Of(obj)
	return plan.Input{
		Rules:           o.Rules,
		Annotations:     optin.Of(obj),
		OptInOnly:       kind.Recreate,
		Controlled:      kind.Controlled(obj),
		Policies:        named,
		Refs:            uses,
		Configs:         map[string]plan.Config{},
		RestartOnCreate: o.RestartOnCreate,
		ReloadOnDelete:  o.ReloadOnDelete,
	}
}

// Mounted adds to in one reference per SecretProviderClass the workload's
// pods mount through the Secrets Store CSI Driver and that it opted in to
// (csi.Refs): mounted maps each class to the versions of the objects it
// mounts (nil: none known; the classes recorded then count as
// unchanged).
func Mounted(in *plan.Input, mounted map[string]map[string]string) {
	classes, configs := csi.Refs(mounted, in.Recorded, in.Annotations)
	for _, ref := range classes {
		if _, dup := in.Configs[ref.ID()]; !dup {
			in.Refs = append(in.Refs, ref)
			in.Configs[ref.ID()] = configs[ref.ID()]
		}
	}
}
