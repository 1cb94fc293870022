package optin

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/workload"
)

// Keys renames annotation keys: each entry maps one of this package's keys
// (ReloaderAuto, ConfigMapReload...) to the key an installation uses in its
// place, as Reloader's annotation flags do (--auto-annotation,
// --configmap-annotation...). With an entry, the installation's key is
// read with the meaning of this package's key, and this package's key
// itself is no longer read (Reloader reads only the key its flag names).
//
// Keys are applied where objects enter watcher (Rename: the store's
// transforms, the commands' reads), so that every reader of this package
// sees its own keys only. Nil or empty: nothing renamed.
type Keys map[string]string

// Renamable are the keys an installation may rename: those Reloader's flags
// name.
var Renamable = []string{ConfigMapReload, SecretReload, ReloaderAuto, ConfigMapAuto, SecretAuto, Search, Match, Ignore, PausePeriod}

// Validate tells whether k renames only Renamable keys, each to a valid
// annotation key that no other key of this package, renamed or not, is
// read under.
func (k Keys) Validate() error {
	used := map[string]string{}
	for _, own := range Renamable {
		if _, renamed := k[own]; !renamed {
			used[own] = own
		}
	}
	for _, own := range slices.Sorted(maps.Keys(k)) {
		to := k[own]
		if !slices.Contains(Renamable, own) {
			return fmt.Errorf("annotation %s cannot be renamed", own)
		}
		if msgs := validation.IsQualifiedName(to); len(msgs) > 0 {
			return fmt.Errorf("annotation key %q (for %s): %v", to, own, msgs)
		}
		if other, ok := used[to]; ok && other != own {
			return fmt.Errorf("annotation key %q is read for both %s and %s", to, other, own)
		}
		used[to] = own
	}
	return nil
}

// Annotations returns ann with the installation's keys renamed to this
// package's (see Keys). ann is not changed; it is returned as is when k is
// empty.
func (k Keys) Annotations(ann map[string]string) map[string]string {
	if len(k) == 0 || len(ann) == 0 {
		return ann
	}
	out := make(map[string]string, len(ann))
	theirs := make(map[string]string, len(k))
	for own, to := range k {
		theirs[to] = own
	}
	for key, v := range ann {
		if _, renamed := k[key]; renamed {
			continue // this package's key, read under another name
		}
		if _, ok := theirs[key]; ok {
			continue // set below
		}
		out[key] = v
	}
	for to, own := range theirs {
		if v, ok := ann[to]; ok {
			out[own] = v
		}
	}
	return out
}

// Rename renames, in obj itself, the installation's keys to this
// package's: in its annotations and, for a workload, in its pod
// template's. An object of no workload kind has only its own annotations
// renamed.
func (k Keys) Rename(obj client.Object) {
	if len(k) == 0 {
		return
	}
	obj.SetAnnotations(k.Annotations(obj.GetAnnotations()))
	kind, ok := workload.Of(obj)
	if !ok {
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		path := append(slices.Clone(kind.Template), "metadata", "annotations")
		ann, found, err := unstructured.NestedStringMap(u.Object, path...)
		if err == nil && found {
			_ = unstructured.SetNestedStringMap(u.Object, k.Annotations(ann), path...)
		}
		return
	}
	if tmpl, err := kind.PodTemplate(obj); err == nil && tmpl != nil {
		tmpl.Annotations = k.Annotations(tmpl.Annotations)
	}
}
