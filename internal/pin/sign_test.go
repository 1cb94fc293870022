package pin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func testSign(data []byte) string {
	m := hmac.New(sha256.New, []byte("key"))
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// TestSigned: pins signed for a namespace verify there only, and a list
// a tenant wrote (unsigned, signed for another namespace, altered, too
// long) does not.
func TestSigned(t *testing.T) {
	p := Pins{{ConfigMap, "app"}: "app-pin-0123456789abcdef0123"}
	mac := p.Sign("shop", testSign)
	long := strings.Repeat("configmap/a=a-pin-00000000000000000000,", MaxPins) + p.String()
	tests := []struct {
		name, ns, pins, mac string
		want                bool
	}{
		{"as written", "shop", p.String(), mac, true},
		{"no mac", "shop", p.String(), "", false},
		{"another namespace", "other", p.String(), mac, false},
		{"altered", "shop", p.String() + ",secret/x=x-pin-00000000000000000000", mac, false},
		{"too long", "shop", long, long, false},
		{"empty", "shop", "", mac, false},
	}
	for _, tt := range tests {
		if got := Signed(tt.ns, tt.pins, tt.mac, testSign); got != tt.want {
			t.Errorf("%s: Signed = %v, want %v", tt.name, got, tt.want)
		}
	}
	if (Pins{}).Sign("shop", testSign) != "" || p.Sign("shop", nil) != "" {
		t.Errorf("Sign of nothing, or without a key, is not empty")
	}
}
