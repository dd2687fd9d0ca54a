package mcpadapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// An Access is what a tool needs of its caller, and what a caller may do:
// read (the read-only tools), write (also the tools that change state) or
// admin (also sidecar_reset and erasure). Each level includes the ones
// below it.
type Access int

// The access levels.
const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
	AccessAdmin
)

// String returns "none", "read", "write" or "admin".
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	case AccessAdmin:
		return "admin"
	}
	return "none"
}

// accessOf is the access tool t needs: admin for adminTools, read for the
// read-only tools, write for the others.
func accessOf(t *tool) Access {
	switch {
	case slices.Contains(AdminToolNames(), t.name):
		return AccessAdmin
	case t.hints.readOnly:
		return AccessRead
	}
	return AccessWrite
}

// ToolAccess returns the access the tool named name (unprefixed) needs,
// sidecar_erase included, and false for an unknown tool.
func ToolAccess(name string) (Access, bool) {
	for i := range table {
		if table[i].name == name {
			return accessOf(&table[i]), true
		}
	}
	if name == eraseTool.name {
		return accessOf(&eraseTool), true
	}
	return AccessNone, false
}

// A Caller is who calls the tools, as authentication established it.
type Caller struct {
	// Principal identifies the caller: the subject of its OAuth token, or
	// a name of its static token. The sidecar records it in every history
	// entry the call writes, apart from the agent_id the caller claims.
	Principal string
	// Access is the most the caller may do.
	Access Access
	// Scopes are the caller's scopes as its credential lists them, for an
	// Options.Authorize of the host's own and for error messages.
	Scopes []string
}

type callerKey struct{}

// WithCaller returns a copy of ctx that carries the caller of the tool
// calls made with it. Authentication middleware sets it per request. With a
// caller, a tool call is allowed only if Options.Authorize allows it or,
// without Authorize, if the caller's Access covers the tool's; without a
// caller every call is allowed (a host that authenticates nobody). The
// history entries a call writes record the caller's Principal
// (state.WithPrincipal), unless ctx names a principal already.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller WithCaller put in ctx, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// ErrForbidden is the error of a tool call its caller may not make. A
// custom Options.Authorize should return an error that wraps it.
var ErrForbidden = errors.New("permission denied")

// authorize checks that the call of tool (unprefixed), which needs need,
// is allowed in ctx.
func (o *Options) authorize(ctx context.Context, tool string, need Access) error {
	if o.Authorize != nil {
		return o.Authorize(ctx, tool, need)
	}
	c, ok := CallerFrom(ctx)
	if !ok || c.Access >= need {
		return nil
	}
	return DeniedError(tool, need, c)
}

// DeniedError returns the error that tells caller c it may not call tool,
// which needs need: it wraps ErrForbidden and says what access the tool
// needs and what the caller has.
func DeniedError(tool string, need Access, c Caller) error {
	has := c.Access.String()
	if len(c.Scopes) > 0 {
		has += " (scopes: " + strings.Join(c.Scopes, " ") + ")"
	}
	return fmt.Errorf("%w: %s needs %s access and this caller has %s access; ask for a token with more scope",
		ErrForbidden, tool, need, has)
}

// FilterTools returns the tools of list (named with opts.Prefix) that the
// caller in ctx may call, as tools/list should show them: tools the caller
// may not call are left out, and other tools (not this package's) are
// kept.
func FilterTools(ctx context.Context, opts *Options, list []mcp.Tool) []mcp.Tool {
	o := &Options{}
	if opts != nil {
		o = opts
	}
	if _, ok := CallerFrom(ctx); !ok && o.Authorize == nil {
		return list
	}
	out := list[:0:0]
	for _, t := range list {
		name, ok := strings.CutPrefix(t.Name, o.Prefix)
		if ok {
			if need, known := ToolAccess(name); known && o.authorize(ctx, name, need) != nil {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

// AddListFilter adds to hooks the filter of tools/list results by the
// caller (FilterTools). NewServer does it; a host that passes its own
// server.WithHooks to NewServer replaces NewServer's hooks, and should call
// AddListFilter on its own.
func AddListFilter(hooks *server.Hooks, opts *Options) {
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if res != nil {
			res.Tools = FilterTools(ctx, opts, res.Tools)
		}
	})
}
