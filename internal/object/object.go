// Package object names a Kubernetes object: its kind, namespace and name.
// Ref is the one value the guards, the holds, the alerts and the Events use
// for a workload or a ConfigMap or Secret; it is formatted for people by
// String and never parsed back.
package object

// Ref names an object. The zero Ref names nothing.
type Ref struct {
	Kind      string
	Namespace string
	Name      string
}

// String returns "Kind namespace/name", for people (logs, Event notes,
// messages). Code compares Refs, never their strings.
func (r Ref) String() string {
	if r.IsZero() {
		return ""
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// IsZero reports whether r names nothing.
func (r Ref) IsZero() bool { return r == Ref{} }

// Compare orders Refs by namespace, name, then kind, for stable output.
func Compare(a, b Ref) int {
	switch {
	case a.Namespace != b.Namespace:
		return cmpStr(a.Namespace, b.Namespace)
	case a.Name != b.Name:
		return cmpStr(a.Name, b.Name)
	}
	return cmpStr(a.Kind, b.Kind)
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
