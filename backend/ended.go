package backend

import (
	"context"
	"time"
)

// Ended returns ctx's error, or context.DeadlineExceeded when ctx's
// deadline has passed but its timer has not fired yet (a client's socket
// deadline, set from ctx's, can fire first), or nil while ctx is live.
// Drivers use it to say that a failed call failed because its caller's
// time ran out.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
