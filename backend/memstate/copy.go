package memstate

import (
	"context"
	"slices"
)

// RaiseRevision makes the revisions namespace ns gives from now on greater
// than floor (it does nothing if they already are), so that records copied
// from another store (package migrate) keep fences and versions growing.
func (d *Driver) RaiseRevision(_ context.Context, ns string, floor int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revs[ns] = max(d.revs[ns], floor)
	return nil
}

// Namespaces returns the namespaces that hold a record or a history event,
// sorted.
func (d *Driver) Namespaces(context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for ns, s := range d.spaces {
		if len(s.byKey) > 0 || s.log.len() > 0 {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out, nil
}
