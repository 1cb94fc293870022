package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// Verbs as the benchmark counts them. A watch that begins by sending the
// current state (sendInitialEvents=true, "watch-list") replaces a LIST, so
// it is counted apart from plain watches.
const (
	verbList      = "list"
	verbWatch     = "watch"
	verbWatchList = "watchlist"
)

// request names what e asked for, as "verb resource": "patch
// deployments", "watchlist secrets", "get /apis" (no object). An eviction
// a PodDisruptionBudget refused (429) is "create pods/eviction refused".
func (e auditEvent) request() string {
	verb := e.Verb
	u, err := url.ParseRequestURI(e.RequestURI)
	if verb == verbWatch && err == nil && u.Query().Get("sendInitialEvents") == "true" {
		verb = verbWatchList
	}
	switch {
	case e.ObjectRef != nil && e.ObjectRef.Subresource != "":
		name := verb + " " + e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
		if e.ObjectRef.Subresource == "eviction" && e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusTooManyRequests {
			name += " refused"
		}
		return name
	case e.ObjectRef != nil:
		return verb + " " + e.ObjectRef.Resource
	case err == nil:
		return verb + " " + u.Path
	}
	return verb + " " + e.RequestURI
}

// housekeeping tells requests a controller makes whatever it is doing:
// Lease renewals and Events.
func (e auditEvent) housekeeping() bool {
	return e.ObjectRef != nil && (e.ObjectRef.Resource == "leases" || e.ObjectRef.Resource == "events")
}

// isWrite tells whether verb changes something.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// phase is a named stretch of the run; it ends where the next one begins.
type phase struct {
	Name  string
	Start time.Time
}

// requestCounts counts requests by phase, then by "verb resource".
type requestCounts map[string]map[string]int

// auditCounter counts the requests of one user, each once, in the phase in
// which kube-apiserver received it. Requests before the first phase or
// after end are left out.
//
// A long-running request (a watch) is logged at ResponseStarted and again
// at ResponseComplete; others only at ResponseComplete (RequestReceived is
// not logged). The counter remembers the IDs of started requests so that
// each is counted once.
type auditCounter struct {
	user    string
	phases  []phase // by start time
	end     time.Time
	started map[string]bool
	counts  requestCounts
}

func newAuditCounter(user string, phases []phase, end time.Time) *auditCounter {
	return &auditCounter{user: user, phases: phases, end: end, started: map[string]bool{}, counts: requestCounts{}}
}

// add counts e if it is the first event of one of the user's requests.
func (c *auditCounter) add(e auditEvent) {
	if e.User.Username != c.user {
		return
	}
	if c.started[e.AuditID] {
		return
	}
	if e.Stage == "ResponseStarted" {
		c.started[e.AuditID] = true
	}
	if !e.Received.Before(c.end) {
		return
	}
	name := ""
	for _, p := range c.phases {
		if !e.Received.Before(p.Start) {
			name = p.Name
		}
	}
	if name == "" {
		return
	}
	if c.counts[name] == nil {
		c.counts[name] = map[string]int{}
	}
	c.counts[name][e.request()]++
}

// countAudit reads a whole audit log and counts user's requests by phase.
func countAudit(r io.Reader, user string, phases []phase, end time.Time) (requestCounts, error) {
	c := newAuditCounter(user, phases, end)
	if err := eachAuditEvent(r, c.add); err != nil {
		return nil, err
	}
	return c.counts, nil
}

// eachAuditEvent calls fn with every event of a whole audit log.
func eachAuditEvent(r io.Reader, fn func(auditEvent)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		e, err := parseAuditLine(sc.Bytes())
		if err != nil {
			return fmt.Errorf("audit log line %d: %w", n, err)
		}
		fn(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	return nil
}

func parseAuditLine(line []byte) (auditEvent, error) {
	var e auditEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return auditEvent{}, err
	}
	return e, nil
}

// auditTail reads what was appended to an audit log since its last read,
// whole lines only.
type auditTail struct {
	path    string
	offset  int64
	partial []byte // the start of a line still being written
}

// next calls fn with each new complete event of the log.
func (t *auditTail) next(fn func(auditEvent)) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, t.offset, 1<<40))
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	t.offset += int64(len(data))
	data = append(t.partial, data...)
	last := bytes.LastIndexByte(data, '\n')
	t.partial = append([]byte(nil), data[last+1:]...)
	for line := range strings.SplitSeq(string(data[:last+1]), "\n") {
		if line == "" {
			continue
		}
		e, err := parseAuditLine([]byte(line))
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		fn(e)
	}
	return nil
}

// countWrites reads a whole audit log and counts the writes of every user
// received from from to to, Lease renewals and Events left out, by "user
// verb resource": what a phase cost the cluster, the controller's writes
// and the other controllers' reactions to them.
func countWrites(r io.Reader, from, to time.Time) (map[string]int, error) {
	counts := map[string]int{}
	err := eachAuditEvent(r, func(e auditEvent) {
		if e.Stage != "ResponseComplete" || !isWrite(e.Verb) || e.housekeeping() || e.Received.Before(from) || e.Received.After(to) {
			return
		}
		counts[e.User.Username+" "+e.request()]++
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
