package options

import (
	"strings"
)

// namespaceSelector is --namespace-selector: a label selector of the
// namespaces watched, in Kubernetes' syntax or in Reloader's (key:value,
// key:*, key=*), converted as reloaderSelector converts Reloader's
// --resource-label-selector. Reloader's flag is a list: given more than
// once, every selector must match. One pair of double quotes around the
// value or an item is removed: Reloader's chart renders
// --namespace-selector="team:a", which Reloader reads as CSV.
type namespaceSelector struct{ s *string }

func (n namespaceSelector) String() string { return *n.s }
func (n namespaceSelector) Type() string   { return "selector" }
func (n namespaceSelector) Set(v string) error {
	items := strings.Split(unquote(v), ",")
	for i := range items {
		items[i] = unquote(items[i])
	}
	sel, err := reloaderSelector(items)
	if err != nil {
		return err
	}
	if *n.s != "" && sel != "" {
		sel = *n.s + "," + sel
	}
	*n.s = sel
	return nil
}
