package integration

import (
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/options"
)

// TestWhoChangedIt: the field manager that changed a Secret's data (here
// kubectl-edit, after helm created it) is named in the change's log line,
// the restart's log line, its Event and its alert.
func TestWhoChangedIt(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	box := &inbox{}
	srv := httptest.NewServer(box)
	defer srv.Close()
	sec := secret(ns, "db", map[string]string{"password": "one"})
	if err := k8s.Create(ctx, sec, client.FieldOwner("helm")); err != nil {
		t.Fatal(err)
	}
	web := track(t, deployment(ns, "web", envFrom("", "db")))
	startWatcher(t, ns, func(o *options.Options) {
		o.Alert = options.Alerts{OnReload: true, Sink: "webhook", WebhookURL: srv.URL}
	})
	waitAdopted(t, deployment(ns, "web", envFrom("", "db")))

	// Within the second of the creation, helm's write and kubectl-edit's
	// would carry the same time: the change comes a second later.
	time.Sleep(time.Second)
	fetch(t, sec)
	sec.Data["password"] = []byte("two")
	if err := k8s.Update(ctx, sec, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitRollouts(t, web, 1)
	g.Eventually(func() []string { return events(t, ns, "web", "Restarted") }, wait, 50*time.Millisecond).
		Should(ContainElement(And(HavePrefix("Restarted because Secret db changed (keys: password; "), HaveSuffix(") by kubectl-edit"))))
	g.Eventually(box.received, wait, 20*time.Millisecond).Should(HaveLen(1))
	g.Expect(box.received()[0]["sources"]).To(ConsistOf(HaveKeyWithValue("changedBy", []any{"kubectl-edit"})))
}
