package alert

import (
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/note"
)

func TestWriterName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"kubectl-edit", "kubectl-edit"},
		{"Go-http-client", "Go-http-client"},
		{"kubectl.exe", "kubectl-exe"},
		{"<users/all> see https://evil.example", "users-all-see-https-evil-example"},
		{"[runbook](https://evil.example)", "runbook-https-evil-example"},
		{"external_secrets", "external-secrets"},
		{"«ünïcode»", "n-code"},
		{"<>", "unnamed"},
		{"", "unnamed"},
		{strings.Repeat("a", 200), strings.Repeat("a", maxWriterName)},
		{strings.Repeat("a", 63) + "!b", strings.Repeat("a", 63)},
	} {
		if got := writerName(tt.in); got != tt.want {
			t.Errorf("writerName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDetailText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"restarted 3 times in the last 1h (budget 5 per 1h); the next restart waits until 10:00",
			"restarted 3 times in the last 1h (budget 5 per 1h); the next restart waits until 10:00"},
		{"ConfigMap a/b changed 6 times in 10m by <users/all>, [x](https://e.example)",
			"ConfigMap a/b changed 6 times in 10m by -users/all-, -x-(https:-//e.example)"},
		{"*b* _i_ ~s~ `c` @all #h &amp;", "-b- -i- -s- -c- -all -h -amp;"},
		{strings.Repeat("é", 300), strings.Repeat("-", 300)},
		{strings.Repeat("x", 600), strings.Repeat("x", maxDetail)},
	} {
		if got := detailText(tt.in); got != tt.want {
			t.Errorf("detailText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := note.Cut(strings.Repeat("é", 300), maxDetail); len(got) != maxDetail || !strings.HasSuffix(got, "é") {
		t.Errorf("cut splits a character: %d bytes", len(got))
	}
}
