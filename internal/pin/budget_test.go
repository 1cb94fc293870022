package pin

import (
	"strings"
	"testing"
)

func TestSignedBytes(t *testing.T) {
	sign := func(b []byte) string { return "mac:" + string(b) }
	good := SignBytes("ns", "app-pin-0123456789abcdef0123", 10, sign)
	for _, tc := range []struct {
		name, ns, snap, value, mac string
		sign                       Signer
		want                       int64
	}{
		{"signed", "ns", "app-pin-0123456789abcdef0123", "10", good, sign, 10},
		{"unsigned without a signer", "ns", "x", "10", "", nil, 10},
		{"no mac", "ns", "app-pin-0123456789abcdef0123", "10", "", sign, 0},
		{"forged size", "ns", "app-pin-0123456789abcdef0123", "11", good, sign, 0},
		{"moved to another name", "ns", "db-pin-0123456789abcdef0123", "10", good, sign, 0},
		{"moved to another namespace", "other", "app-pin-0123456789abcdef0123", "10", good, sign, 0},
		{"negative", "ns", "x", "-10", "", nil, 0},
		{"huge", "ns", "x", "99999999999999", "", nil, 0},
		{"over MaxBytes", "ns", "x", "4194304", "", nil, 0},
		{"not a number", "ns", "x", "1e3", "", nil, 0},
		{"leading zeros", "ns", "x", "010", "", nil, 0},
		{"plus sign", "ns", "x", "+10", "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SignedBytes(tc.ns, tc.snap, tc.value, tc.mac, tc.sign); got != tc.want {
				t.Errorf("SignedBytes = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLooksLikeSnapshot(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, tc := range []struct {
		name, source string
		want         bool
	}{
		{"app-pin-0123456789abcdef0123", "app", true},
		{"app-pin-0123456789abcdef0123", "", true},
		{"app-pin-0123456789abcdef0123", "db", false},
		{"app-config-pin-0123456789abcdef0123", "app", false},
		{SnapshotName(long, "0123456789abcdef0123"), long, true},
		{"app-pin-0123456789ABCDEF0123", "app", false},
		{"app-pin-0123", "app", false},
		{"app", "app", false},
	} {
		if got := LooksLikeSnapshot(tc.name, tc.source); got != tc.want {
			t.Errorf("LooksLikeSnapshot(%q, %q) = %v, want %v", tc.name, tc.source, got, tc.want)
		}
	}
}
