package alert

import (
	"strings"
	"unicode/utf8"

	"github.com/watcher-dev/watcher/internal/note"
)

// Names chosen by the writers of the cluster's objects reach the operators'
// chat: object names and namespaces, data keys, and above all field
// managers ("changed by"), which any writer picks freely (kubectl
// --field-manager, ?fieldManager=, its User-Agent): up to 128 printable
// characters. None of it may become a mention, a link or markup in any
// sink. Each sink renders them through its style:
//
//	text from the cluster        slack             gchat, teams          webhook
//	field manager                reduced (writerName), then as a name   reduced
//	object, namespace, key name  `code`, & < > as entities;             as is (the API
//	                             gchat/teams: < > as ‹ ›, ` as '        server's alphabet)
//	Detail (quotes names)        `code`, as a name                      reduced (detailText)
//	watcher's own words          & < > as entities  as is               as is
//
// A code span is the one construct the three chat services all show
// verbatim: no emphasis, no link, no mention inside it; the backtick that
// would end it early cannot occur in it, and neither can the angle brackets
// that open Slack's and Google Chat's links and mentions (<!channel>,
// <users/all>, <https://x|text>).

// maxWriterName bounds a field manager's name in an alert.
const maxWriterName = 64

// maxDetail bounds an alert's Detail.
const maxDetail = 512

// writerName reduces a field manager's name to the characters of names
// (ASCII letters, digits and '-'), each run of others one '-', at
// most maxWriterName characters: "kubectl-edit" stays, "<users/all> see
// https://evil.example" becomes "users-all-see-https-evil-example". No dot,
// colon or slash is left, so no domain or URL either.
func writerName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= maxWriterName {
			break
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > maxWriterName {
		out = strings.TrimRight(out[:maxWriterName], "-")
	}
	if out == "" {
		return "unnamed"
	}
	return out
}

// detailText reduces a Detail, a sentence of watcher's that may quote
// names writers chose, for the webhook's JSON: letters, digits, spaces and
// the punctuation of watcher's sentences (, ; : . - / % ( ) ' = +) stay,
// any other character becomes '-', "://" becomes ":-//" (no URL scheme),
// and it is cut at maxDetail bytes.
func detailText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == ' ':
			return r
		case strings.ContainsRune(",;:.-/%()'=+", r):
			return r
		}
		return '-'
	}, s)
	return note.Cut(strings.ReplaceAll(s, "://", ":-//"), maxDetail)
}

// style is how a sink renders an alert's text.
type style struct {
	// name renders a name from the cluster (object, namespace, key, field
	// manager) or a Detail inert.
	name func(string) string
	// own escapes watcher's own words for the sink.
	own func(string) string
}

// slackEscape escapes what Slack's mrkdwn reads as markup: the entities
// Slack asks for, so that no <...> is a link or a mention.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// chatCode replaces, in a code span's content, what could end the span or
// open a link or a mention (Google Chat and Teams know no entities).
var chatCode = strings.NewReplacer("`", "'", "<", "‹", ">", "›")

var (
	// plain is the webhook's style: names as they are (writer names and
	// Detail are reduced before), no markup to escape.
	plain = style{name: same, own: same}
	// slackStyle: names in code spans, everything else escaped.
	slackStyle = style{
		name: func(s string) string { return "`" + slackEscape.Replace(strings.ReplaceAll(s, "`", "'")) + "`" },
		own:  slackEscape.Replace,
	}
	// chatStyle is Google Chat's and Teams': names in code spans.
	chatStyle = style{name: func(s string) string { return "`" + chatCode.Replace(s) + "`" }, own: same}
	// nameless leaves names out: for plain text shown by a chat service.
	nameless = style{name: func(string) string { return "" }, own: same}
)

func same(s string) string { return s }

// inert returns a copy of a with its writer names reduced (writerName) and
// its Detail bounded, so that no sink, the webhook's JSON included, shows
// them as chosen.
func (a Alert) inert() Alert {
	if len(a.Sources) > 0 {
		src := make([]Source, len(a.Sources))
		for i, s := range a.Sources {
			s.ChangedBy = mapNames(s.ChangedBy, writerName)
			src[i] = s
		}
		a.Sources = src
	}
	a.Detail = note.Cut(a.Detail, maxDetail)
	return a
}

// mapNames returns f of every name.
func mapNames(names []string, f func(string) string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = f(n)
	}
	return out
}
