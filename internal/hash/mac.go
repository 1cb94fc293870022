package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// macScheme keeps MACs apart from the digests of contents made with the
// same key: no digest is ever a valid MAC, nor the reverse.
const macScheme = "watcher mac v1\x00"

// MAC returns a hex HMAC-SHA256 of data with h's key, for what watcher
// writes on objects and must recognise as its own later (the restart state
// of the guards): nobody without the key can forge it.
func (h *Hasher) MAC(data []byte) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(macScheme))
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))[:32]
}
