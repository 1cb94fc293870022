package pin

import (
	"crypto/hmac"
	"strings"
)

// SignatureAnnotation, on the pod template beside PinsAnnotation, is the
// MAC of the pins with the installation's key (Pins.Sign): what reads the
// pins of a revision (the hand-over, the unpinned-pods check) acts only
// on pins watcher wrote, never on a list a tenant wrote by hand.
const SignatureAnnotation = "watcher.dev/pins-mac"

// Signer computes a MAC with the installation's key (hash.Hasher.MAC).
type Signer func(data []byte) string

// MaxPins is the most entries watcher writes in PinsAnnotation, and the
// most it reads of one: the admission policy evaluates 250 entries of 90
// characters within its CEL cost budget and refuses pods at 300 (measured
// on Kubernetes 1.36). A restart that would pin more pins nothing, with a
// Warning, rather than make the workload's pods unadmittable.
const MaxPins = 200

// Sign returns the MAC of p for a workload of namespace ns ("" when p is
// empty or sign is nil).
func (p Pins) Sign(ns string, sign Signer) string {
	if len(p) == 0 || sign == nil {
		return ""
	}
	return sign([]byte("watcher.dev/pins\x00" + ns + "\x00" + p.String()))
}

// Signed reports whether mac is the MAC of the pins annotation pins (as
// written, Pins.String) of a workload of namespace ns: watcher wrote them.
func Signed(ns, pins, mac string, sign Signer) bool {
	if pins == "" || mac == "" || sign == nil || strings.Count(pins, ",") >= MaxPins {
		return false
	}
	want := sign([]byte("watcher.dev/pins\x00" + ns + "\x00" + pins))
	return hmac.Equal([]byte(want), []byte(mac))
}
