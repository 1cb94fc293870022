package alert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The sinks.
const (
	Slack   = "slack"
	Teams   = "teams"
	GChat   = "gchat"
	Webhook = "webhook"
)

// Sinks are the sinks, the default last.
var Sinks = []string{Slack, Teams, GChat, Webhook}

// Format returns the body sent to sink for a, with info (the
// ALERT_ADDITIONAL_INFO, such as the cluster's name) added as each
// service shows it best; its content type is JSON for every sink.
//
// Every name a writer chose is rendered inert (see style): in the chat
// sinks as a code span, in the webhook's JSON reduced to the characters of
// names.
func Format(sink string, a Alert, info string) ([]byte, error) {
	a = a.inert()
	var body any
	switch sink {
	case Slack:
		body = slack(a, info)
	case Teams:
		body = teams(a, info)
	case GChat:
		body = map[string]string{"text": prefixed(info, a.text(chatStyle))}
	case Webhook:
		a.Detail = detailText(a.Detail)
		body = webhookBody{Alert: a, Message: a.text(plain), AdditionalInfo: info}
	default:
		return nil, fmt.Errorf("unknown alert sink %q", sink)
	}
	// Indented, and with <, > and & as they are (Slack's text escapes
	// them itself), so that the golden files read easily.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// prefixed puts info in front of text as Reloader does: "info : text".
func prefixed(info, text string) string {
	if info == "" {
		return text
	}
	return info + " : " + text
}

// webhookBody is the plain JSON of the webhook sink.
type webhookBody struct {
	Alert
	// Message is the alert as one text line.
	Message        string `json:"message"`
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

// slack is a Slack incoming-webhook message: text, shown in notifications,
// and blocks: the title, a bullet per source, and the additional info as
// context.
func slack(a Alert, info string) map[string]any {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	blocks := []map[string]any{{"type": "section", "text": text{"mrkdwn", a.title(slackStyle)}}}
	if lines := a.lines(slackStyle); len(lines) > 0 {
		for i, l := range lines {
			lines[i] = "• " + l
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": text{"mrkdwn", strings.Join(lines, "\n")}})
	}
	if info != "" {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []text{{"mrkdwn", slackEscape.Replace(info)}}})
	}
	return map[string]any{"text": prefixed(slackEscape.Replace(info), a.text(slackStyle)), "blocks": blocks}
}

// teamsColors are the MessageCard theme colours, by event.
var teamsColors = map[string]string{Restart: "2EB886", Held: "E8912D", Flapping: "E8912D", FailedRollout: "D00000"}

// teams is a Microsoft Teams connector MessageCard: the title, and a fact
// per workload, source (its clauses as package cause says them), reason
// and detail. The summary, shown in
// notifications as plain text where a code span cannot hold a name, names
// only kinds.
func teams(a Alert, info string) map[string]any {
	st := chatStyle
	type fact struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	var facts []fact
	if a.Workload != nil {
		facts = append(facts, fact{"Workload", a.Workload.Kind + " " + st.name(a.Workload.Namespace+"/"+a.Workload.Name)})
	}
	for _, s := range a.Sources {
		cl := s.says(a.Event, st)
		var v []string
		if cl.What != "" {
			v = append(v, cl.What)
		}
		if cl.From != "" {
			v = append(v, cl.From)
		}
		if cl.By != "" {
			v = append(v, "changed by "+cl.By)
		}
		facts = append(facts, fact{cl.Source, strings.Join(v, "; ")})
	}
	if a.Reason != "" {
		facts = append(facts, fact{"Reason", a.Reason})
	}
	if a.Detail != "" {
		facts = append(facts, fact{"Detail", st.name(a.Detail)})
	}
	card := map[string]any{
		"@type":      "MessageCard",
		"@context":   "https://schema.org/extensions",
		"summary":    strings.Join(strings.Fields(a.title(nameless)), " "),
		"themeColor": teamsColors[a.Event],
		"title":      a.title(st),
		"sections":   []map[string]any{{"facts": facts}},
	}
	if info != "" {
		card["text"] = info
	}
	return card
}
