package refs

// Merge returns the union of lists of references, one Ref per objectID,
// sorted as FromPodSpec sorts them: an objectID read whole by any list is read
// whole; otherwise its keys are the union of the keys, a key required when
// any list requires it; the objectID is optional when every list says so.
func Merge(lists ...[]Ref) []Ref {
	c := collector{}
	optional, required := true, false
	for _, rs := range lists {
		for _, r := range rs {
			if r.AllKeys {
				c.add(r.Kind, r.Name, &r.Optional)
				continue
			}
			if !r.Optional {
				c.need(r.Kind, r.Name)
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

// need marks the object kind/name as needed by a reference that is not
// optional, whatever keys it reads.
func (c collector) need(kind Kind, name string) {
	if u := c[objectID{kind, name}]; u != nil {
		u.needed = true
		return
	}
	c[objectID{kind, name}] = &usage{keys: map[string]bool{}, needed: true}
}
