package alert_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/alert"
)

// hostile are texts a writer may choose as a field manager (any printable
// text up to 128 characters): Slack's and Google Chat's mentions and links,
// Markdown links and emphasis, a bare URL, a long name.
var hostile = []string{
	"<users/all> rotate your token at <https://evil.example|the runbook>",
	"[the runbook](https://evil.example)",
	"<!channel> <@U024BE7LH> &lt;!here&gt;",
	"*bold* _italic_ ~strike~ `code` **b** # h",
	"see https://evil.example/login now",
	"`<users/all>`",
	strings.Repeat("x", 100) + "<users/all>",
}

// TestInertInEverySink: for every field of an alert whose text a writer
// of the cluster chose, and every sink, the body carries it inert. Chat
// sinks (Slack, Google Chat, Teams): outside code spans there is nothing
// of the writer's text, code spans are closed, and no angle bracket opens
// a link or mention anywhere; the webhook's JSON: writer names hold only
// the characters of names, and no text holds markup or a URL scheme.
// Object names and keys are those the API server allows, but may look like
// domains; they too appear only in code spans in the chat sinks.
func TestInertInEverySink(t *testing.T) {
	base := func() alert.Alert {
		return alert.Alert{
			Event:    alert.Held,
			Workload: &alert.Object{Kind: "Deployment", Namespace: "team-a", Name: "web"},
			Sources: []alert.Source{{Object: alert.Object{Kind: "Secret", Namespace: "team-a", Name: "db"},
				Keys: []string{"k"}, SealedSecret: "db", ChangedBy: []string{"kubectl-edit"}}},
			Reason: "flapping",
		}
	}
	type field struct {
		name string
		set  func(a *alert.Alert, v string)
		// apiNames: the API server allows only names here, so the value
		// tried is a domain-like name, not hostile text.
		apiNames bool
	}
	fields := []field{
		{"changedBy", func(a *alert.Alert, v string) { a.Sources[0].ChangedBy = []string{"helm", v} }, false},
		{"detail", func(a *alert.Alert, v string) { a.Detail = "changed 6 times in 10m by " + v + "; held" }, false},
		{"workload name", func(a *alert.Alert, v string) { a.Workload.Name = v }, true},
		{"workload namespace", func(a *alert.Alert, v string) { a.Workload.Namespace = v }, true},
		{"source name", func(a *alert.Alert, v string) { a.Sources[0].Name = v }, true},
		{"source namespace", func(a *alert.Alert, v string) { a.Sources[0].Namespace = v }, true},
		{"key", func(a *alert.Alert, v string) { a.Sources[0].Keys = []string{"a", v} }, true},
		{"sealedSecret", func(a *alert.Alert, v string) { a.Sources[0].SealedSecret = v }, true},
	}
	for _, f := range fields {
		values := hostile
		if f.apiNames {
			values = []string{"evil.example.com", "my_key.evil.example"}
		}
		for _, v := range values {
			for _, event := range alert.Events {
				a := base()
				a.Event = event
				f.set(&a, v)
				for _, sink := range alert.Sinks {
					body, err := alert.Format(sink, a, "cluster prod-1")
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range inertProblems(t, sink, body) {
						t.Errorf("%s, %s = %q, event %s: %s\n%s", sink, f.name, v, event, p, body)
					}
				}
			}
		}
	}
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	// writerMarks are what of the hostile texts (and the domain-like names)
	// must not show outside a code span.
	writerMarks = []string{"evil", "users/", "channel", "runbook", "[", "](", "*", "~", "#", "http", "@", "&lt;", "xxxxx", "my_key"}
	// webhookWriter is a writer name in the webhook's JSON.
	webhookWriter = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// inertProblems lists what is not inert in body, a body of sink.
func inertProblems(t *testing.T, sink string, body []byte) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%s: not JSON: %v", sink, err)
	}
	var problems []string
	if sink == alert.Webhook {
		m := doc.(map[string]any)
		for _, src := range m["sources"].([]any) {
			for _, w := range src.(map[string]any)["changedBy"].([]any) {
				if !webhookWriter.MatchString(w.(string)) {
					problems = append(problems, "writer name "+w.(string)+" is not reduced to the characters of names")
				}
			}
		}
		for _, k := range []string{"detail", "message"} {
			s, _ := m[k].(string)
			// Keys may hold '_' (the API server allows it): data, as is.
			if strings.ContainsAny(s, "<>[]`*~|@&#!\\") || strings.Contains(s, "://") {
				problems = append(problems, k+" holds markup or a URL: "+s)
			}
		}
		return problems
	}
	for _, s := range texts(doc) {
		if strings.ContainsAny(s, "<>") {
			problems = append(problems, "an angle bracket in "+s)
		}
		if strings.Count(s, "`")%2 != 0 {
			problems = append(problems, "a code span left open in "+s)
		}
		outside := codeSpan.ReplaceAllString(s, "")
		for _, m := range writerMarks {
			if strings.Contains(outside, m) {
				problems = append(problems, "outside code spans, "+m+" in "+s)
			}
		}
		for _, c := range codeSpan.FindAllString(s, -1) {
			if len(c) > 2+512 {
				problems = append(problems, "a span longer than any bound: "+c)
			}
		}
	}
	return problems
}

// texts are the strings of a chat body shown to people: every string
// value but the MessageCard's schema fields, block types and colour.
func texts(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, e := range v {
			out = append(out, texts(e)...)
		}
	case map[string]any:
		for k, e := range v {
			switch k {
			case "@type", "@context", "type", "themeColor":
				continue
			}
			out = append(out, texts(e)...)
		}
	}
	return out
}
