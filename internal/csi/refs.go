package csi

import (
	"maps"
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Refs returns the references a workload is given for the
// SecretProviderClasses its pods mount, and their state for plan.Decide:
//
//	class                                  opted in  given as
//	mounted (current versions known)       yes       Keys: object id → version hash
//	recorded, versions not known now       yes       Keys: as recorded (no change)
//	  (no status now, or not read yet)
//	recorded as one digest, not known now  yes       not given (the record drops it)
//	any                                    no        not given (the record drops it)
//
// mounted is Watcher.Mounted's answer; rec and ann are the workload's
// record and annotations (optin.Of). Each reference uses every key
// (AllKeys: an object added or gone is a change) and is optional (pods
// start without any one object of it). The references are sorted by name.
func Refs(mounted map[string]map[string]string, rec plan.Record, ann map[string]string) ([]refs.Ref, map[string]plan.Config) {
	configs := map[string]plan.Config{}
	for class, keys := range mounted {
		if OptedIn(ann, class) {
			configs[class] = plan.Config{Present: true, Keys: keys}
		}
	}
	prefix := string(refs.SecretProviderClass) + "/"
	for id, e := range rec {
		class, ok := strings.CutPrefix(id, prefix)
		if !ok || e == nil || e.Digest != "" || !OptedIn(ann, class) {
			continue
		}
		if _, known := configs[class]; !known {
			configs[class] = plan.Config{Present: true, Keys: maps.Clone(e.Keys)}
		}
	}
	out := make([]refs.Ref, 0, len(configs))
	byID := make(map[string]plan.Config, len(configs))
	for _, class := range slices.Sorted(maps.Keys(configs)) {
		ref := refs.Ref{Kind: refs.SecretProviderClass, Name: class, AllKeys: true, Optional: true}
		out = append(out, ref)
		byID[ref.ID()] = configs[class]
	}
	return out, byID
}
