package mcpadapter

import (
	"context"
	"errors"

	"github.com/statesidecar/state"
)

// The results of the lease tools, fields in the Python sidecar's order
// followed by the new ones.
type (
	acquireResult struct {
		Acquired   bool    `json:"acquired"`
		ResourceID string  `json:"resource_id"`
		Holder     string  `json:"holder" desc:"the holder now: you, or the other holder"`
		ExpiresAt  *stamp  `json:"expires_at" desc:"when the holder's lease expires"`
		Reason     *string `json:"reason" desc:"why the lease was not acquired"`
		Fence      *int64  `json:"fence" desc:"fencing token of this tenure; larger for every new holder"`
	}
	releaseResult struct {
		Released   bool   `json:"released"`
		ResourceID string `json:"resource_id"`
	}
	renewResult struct {
		Renewed    bool   `json:"renewed"`
		ResourceID string `json:"resource_id"`
		ExpiresAt  *stamp `json:"expires_at"`
	}
)

func leaseAcquire(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	res := a.str("resource_id")
	l, err := st.TryAcquireLease(ctx, res, a.str("holder_id"), a.dur("ttl_seconds"))
	var he *state.HeldError
	switch {
	case errors.As(err, &he):
		return acquireResult{ResourceID: res, Holder: he.Holder, ExpiresAt: optStamp(he.ExpiresAt), Reason: optStr(he.Error())}, nil
	case err != nil:
		return nil, err
	}
	return acquireResult{Acquired: true, ResourceID: res, Holder: l.Holder, ExpiresAt: optStamp(l.ExpiresAt), Fence: &l.Fence}, nil
}

func leaseRelease(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	res := a.str("resource_id")
	ok, err := st.ReleaseLease(ctx, res, a.str("holder_id"))
	if err != nil {
		return nil, err
	}
	return releaseResult{Released: ok, ResourceID: res}, nil
}

func leaseRenew(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	res := a.str("resource_id")
	l, err := st.RenewLease(ctx, res, a.str("holder_id"), a.dur("ttl_seconds"))
	switch {
	case errors.Is(err, state.ErrNotHeld):
		return renewResult{ResourceID: res}, nil
	case err != nil:
		return nil, err
	}
	return renewResult{Renewed: true, ResourceID: res, ExpiresAt: optStamp(l.ExpiresAt)}, nil
}
