package alert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/watcher-dev/watcher/internal/attribution"
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
func Format(sink string, a Alert, info string) ([]byte, error) {
	var body any
	switch sink {
	case Slack:
		body = slack(a, info)
	case Teams:
		body = teams(a, info)
	case GChat:
		body = map[string]string{"text": prefixed(info, a.Text("*"))}
	case Webhook:
		body = webhookBody{Alert: a, Message: a.Text(""), AdditionalInfo: info}
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

// slackEscape escapes what Slack's mrkdwn reads as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slack is a Slack incoming-webhook message: text, shown in notifications,
// and blocks: the title, a bullet per source, and the additional info as
// context.
func slack(a Alert, info string) map[string]any {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	blocks := []map[string]any{{"type": "section", "text": text{"mrkdwn", slackEscape.Replace(a.Title("*"))}}}
	if lines := a.Lines("*"); len(lines) > 0 {
		for i, l := range lines {
			lines[i] = "• " + slackEscape.Replace(l)
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": text{"mrkdwn", strings.Join(lines, "\n")}})
	}
	if info != "" {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []text{{"mrkdwn", slackEscape.Replace(info)}}})
	}
	return map[string]any{"text": slackEscape.Replace(prefixed(info, a.Text("*"))), "blocks": blocks}
}

// teamsColors are the MessageCard theme colours, by event.
var teamsColors = map[string]string{Restart: "2EB886", Held: "E8912D", Flapping: "E8912D", FailedRollout: "D00000"}

// teams is a Microsoft Teams connector MessageCard: the title, and a fact
// per workload, source, reason and detail.
func teams(a Alert, info string) map[string]any {
	type fact struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	var facts []fact
	if a.Workload != nil {
		facts = append(facts, fact{"Workload", a.Workload.String()})
	}
	for _, s := range a.Sources {
		var v []string
		if len(s.Keys) > 0 {
			v = append(v, "keys: "+strings.Join(s.Keys, ", "))
		}
		if s.SealedSecret != "" {
			v = append(v, "from SealedSecret "+s.Namespace+"/"+s.SealedSecret)
		}
		if len(s.ChangedBy) > 0 {
			v = append(v, "changed by "+attribution.Join(s.ChangedBy))
		}
		facts = append(facts, fact{s.Object.String(), strings.Join(v, "; ")})
	}
	if a.Reason != "" {
		facts = append(facts, fact{"Reason", a.Reason})
	}
	if a.Detail != "" {
		facts = append(facts, fact{"Detail", a.Detail})
	}
	card := map[string]any{
		"@type":      "MessageCard",
		"@context":   "https://schema.org/extensions",
		"summary":    a.Title(""),
		"themeColor": teamsColors[a.Event],
		"title":      a.Title(""),
		"sections":   []map[string]any{{"facts": facts}},
	}
	if info != "" {
		card["text"] = info
	}
	return card
}
