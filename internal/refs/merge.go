package refs

// Merge returns the union of lists of references, one Ref per object,
// sorted as FromPodSpec sorts them: an object read whole by any list is read
// whole; otherwise its keys are the union of the keys, a key required when
// any list requires it.
func Merge(lists ...[]Ref) []Ref {
	c := collector{}
	optional, required := true, false
	for _, rs := range lists {
		for _, r := range rs {
			if r.AllKeys {
				c.add(r.Kind, r.Name, &optional)
				continue
			}
			for _, k := range r.Keys {
				if r.Requires(k) {
					c.add(r.Kind, r.Name, &required, k)
				} else {
					c.add(r.Kind, r.Name, &optional, k)
				}
			}
		}
	}
	return c.refs()
}
