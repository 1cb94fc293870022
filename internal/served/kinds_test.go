package served

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
)

// fakeAPI is an optional API that is enabled and disabled in memory.
type fakeAPI struct {
	name string
	on   bool
}

func (f *fakeAPI) Name() string                 { return f.name }
func (f *fakeAPI) APIVersion() string           { return "example.com/v1" }
func (f *fakeAPI) Resource() string             { return f.name }
func (f *fakeAPI) Enabled() bool                { return f.on }
func (f *fakeAPI) Enable(context.Context) error { f.on = true; return nil }
func (f *fakeAPI) Disable()                     { f.on = false }

// TestKindsReadiness: watcher is not ready until every optional
// API was asked about once; an answer that is not known (discovery
// failed) counts, so readiness never waits on discovery.
func TestKindsReadiness(t *testing.T) {
	a, b := &fakeAPI{name: "as"}, &fakeAPI{name: "bs"}
	o := NewKinds([]Optional{a, b}, nil, logr.Discard())
	if err := o.Checked(nil); err == nil {
		t.Fatal("ready before any answer")
	}
	o.apply(t.Context(), a, Answer{Served: true, Known: true})
	if err := o.Checked(nil); err == nil {
		t.Fatal("ready with one API not asked about")
	}
	o.apply(t.Context(), b, Answer{})
	if err := o.Checked(nil); err != nil {
		t.Fatalf("not ready after every API was asked about: %v", err)
	}
	if !a.on || b.on {
		t.Errorf("enabled: %v %v, want true false", a.on, b.on)
	}
}
