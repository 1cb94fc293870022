package hash

// EncodeKeys writes key hashes as KeysAnnotation holds them, for the
// transforms of other kinds (see package sealed); FromObject reads them.
func EncodeKeys(keys map[string]string) string { return encodeKeys(keys) }
