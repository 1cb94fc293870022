package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// auditLine returns an audit log line as kube-apiserver writes it.
func auditLine(id, stage, verb, uri, user, resource string, received time.Time) string {
	objectRef := ""
	if resource != "" {
		objectRef = `"objectRef":{"resource":"` + resource + `","apiVersion":"v1"},`
	}
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id +
		`","stage":"` + stage + `","requestURI":"` + uri + `","verb":"` + verb +
		`","user":{"username":"` + user + `","groups":["system:masters","system:authenticated"]},` + objectRef +
		`"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"` +
		received.UTC().Format("2006-01-02T15:04:05.000000Z") + `","stageTimestamp":"` +
		received.UTC().Format("2006-01-02T15:04:05.000000Z") + `"}`
}

func TestAuditRequest(t *testing.T) {
	tests := []struct {
		verb, uri, resource, want string
	}{
		{"patch", "/apis/apps/v1/namespaces/bench/deployments/app-1", "deployments", "patch deployments"},
		{"list", "/api/v1/secrets?limit=500", "secrets", "list secrets"},
		{"watch", "/api/v1/secrets?allowWatchBookmarks=true&resourceVersion=5&watch=true", "secrets", "watch secrets"},
		{"watch", "/api/v1/secrets?allowWatchBookmarks=true&sendInitialEvents=true&watch=true", "secrets", "watchlist secrets"},
		{"get", "/apis", "", "get /apis"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			g := NewWithT(t)
			e, err := parseAuditLine([]byte(auditLine("1", "ResponseComplete", tt.verb, tt.uri, "u", tt.resource, time.Now())))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(e.request()).To(Equal(tt.want))
		})
	}
}

// TestCountAudit checks that each request of the user is counted once, in
// the phase it was received in, and nothing else.
func TestCountAudit(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	phases := []phase{{phaseStartup, at(0)}, {phaseIdle, at(10)}, {phaseChanges, at(20)}}
	const ctrl = "bench-controller"
	watchURI := "/api/v1/secrets?sendInitialEvents=true&watch=true"
	lines := []string{
		auditLine("w1", "ResponseStarted", "watch", watchURI, ctrl, "secrets", at(1)),
		auditLine("p1", "ResponseComplete", "patch", "/x", ctrl, "deployments", at(2)),
		auditLine("p2", "ResponseComplete", "patch", "/x", ctrl, "deployments", at(10)), // idle starts at 10
		auditLine("l1", "ResponseComplete", "list", "/api/v1/secrets", ctrl, "secrets", at(21)),
		auditLine("w1", "ResponseComplete", "watch", watchURI, ctrl, "secrets", at(1)), // the same watch ends
		auditLine("x1", "ResponseComplete", "patch", "/x", "someone-else", "deployments", at(22)),
		auditLine("b1", "ResponseComplete", "get", "/x", ctrl, "secrets", at(-1)),       // before start-up
		auditLine("a1", "ResponseComplete", "get", "/x", ctrl, "secrets", at(40)),       // after the end
		auditLine("w2", "ResponseComplete", "watch", watchURI, ctrl, "secrets", at(25)), // failed before it started
	}
	counts, err := countAudit(strings.NewReader(strings.Join(lines, "\n")+"\n"), ctrl, phases, at(30))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts).To(Equal(requestCounts{
		phaseStartup: {"watchlist secrets": 1, "patch deployments": 1},
		phaseIdle:    {"patch deployments": 1},
		phaseChanges: {"list secrets": 1, "watchlist secrets": 1},
	}))
	g.Expect(listsAfterStartup(counts)).To(Equal([]string{"changes: 1× list secrets", "changes: 1× watchlist secrets"}))

	_, err = countAudit(strings.NewReader("{not json\n"), ctrl, phases, at(30))
	g.Expect(err).To(MatchError(ContainSubstring("audit log line 1")))
}

// TestAuditTail checks that a line is read once, and only once complete.
func TestAuditTail(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	first := auditLine("1", "ResponseComplete", "patch", "/x", "u", "deployments", time.Now())
	second := auditLine("2", "ResponseComplete", "create", "/x", "u", "events", time.Now())
	g.Expect(os.WriteFile(path, []byte(first+"\n"+second[:40]), 0o600)).To(Succeed())

	tail := &auditTail{path: path}
	var ids []string
	collect := func(e auditEvent) { ids = append(ids, e.AuditID) }
	g.Expect(tail.next(collect)).To(Succeed())
	g.Expect(ids).To(Equal([]string{"1"}))

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString(second[40:] + "\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
	g.Expect(tail.next(collect)).To(Succeed())
	g.Expect(tail.next(collect)).To(Succeed())
	g.Expect(ids).To(Equal([]string{"1", "2"}))
}

func TestAuditRequestEviction(t *testing.T) {
	for code, want := range map[int]string{201: "create pods/eviction", 429: "create pods/eviction refused"} {
		g := NewWithT(t)
		line := `{"auditID":"1","stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/default/pods/p/eviction",` +
			`"objectRef":{"resource":"pods","subresource":"eviction"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
		e, err := parseAuditLine([]byte(line))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.request()).To(Equal(want))
	}
}

// TestCountWrites: the writes of every user in the window are counted,
// once each, by user and request; reads, Leases, Events and what falls
// outside the window are not.
func TestCountWrites(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const dc = "system:serviceaccount:kube-system:deployment-controller"
	lines := []string{
		auditLine("p0", "ResponseComplete", "patch", "/x", "bench-controller", "deployments", at(0.5)), // before
		auditLine("p1", "ResponseComplete", "patch", "/x", "bench-controller", "deployments", at(1)),
		auditLine("u1", "ResponseComplete", "update", "/x", dc, "deployments", at(1.1)),
		auditLine("u2", "ResponseComplete", "update", "/x", dc, "replicasets", at(1.2)),
		auditLine("g1", "ResponseComplete", "get", "/x", dc, "deployments", at(1.3)),
		auditLine("l1", "ResponseComplete", "update", "/x", dc, "leases", at(1.4)),
		auditLine("e1", "ResponseComplete", "create", "/x", dc, "events", at(1.5)),
		auditLine("p2", "ResponseComplete", "patch", "/x", "bench-controller", "deployments", at(3)), // after
	}
	got, err := countWrites(strings.NewReader(strings.Join(lines, "\n")+"\n"), at(1), at(2))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]int{
		"bench-controller patch deployments": 1,
		dc + " update deployments":           1,
		dc + " update replicasets":           1,
	}))
}
