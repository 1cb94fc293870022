package policy

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
)

// listing is a store of Deployments of shop that counts its lists.
type listing struct {
	stubStore
	deployments []*metav1.PartialObjectMetadata
	lists       int
}

func (l *listing) Workloads(string, string) ([]*metav1.PartialObjectMetadata, error) {
	l.lists++
	return l.deployments, nil
}

// TestSelected: a policy's targets by selector list the namespace's
// workloads once per kind and each distinct selector once, and each
// selected workload is returned once.
func TestSelected(t *testing.T) {
	st := &listing{}
	for i := range 4 {
		st.deployments = append(st.deployments, deploy(fmt.Sprintf("d%d", i), map[string]string{"tier": fmt.Sprint(i % 2)}, false))
	}
	var targets []v1alpha1.Target
	for j := range 50 {
		targets = append(targets, v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", fmt.Sprint(j%2))})
	}
	targets = append(targets, v1alpha1.Target{Kind: "Deployment", Name: "web"}) // stubStore has web
	got, err := Selected(targetPolicy("p", targets...), st)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range got {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if want := []string{"d0", "d1", "d2", "d3", "web"}; !slices.Equal(names, want) || st.lists != 1 {
		t.Errorf("Selected = %v after %d lists; want %v after 1", names, st.lists, want)
	}
	c, err := Ready(targetPolicy("p", targets...), st)
	if err != nil || c.Reason != ReasonSourcesNotFound || st.lists != 2 {
		t.Errorf("Ready = %s %q after %d lists in all, %v", c.Reason, c.Message, st.lists, err)
	}
}
