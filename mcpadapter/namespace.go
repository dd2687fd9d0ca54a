package mcpadapter

import "context"

type namespaceKey struct{}

// WithNamespace returns a copy of ctx that makes every tool called with it
// work in namespace ns of the store instead of the store's own namespace.
// Authentication middleware sets it per request, so that each bearer token
// sees only its own keys, runs, leases, sessions and history. An invalid
// namespace name makes the tool call fail with a tool error.
func WithNamespace(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, namespaceKey{}, ns)
}

// NamespaceFrom returns the namespace WithNamespace put in ctx, if any.
func NamespaceFrom(ctx context.Context) (string, bool) {
	ns, ok := ctx.Value(namespaceKey{}).(string)
	return ns, ok
}
