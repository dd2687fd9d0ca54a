package redisstate

// Hold occupies every sender of d's Gets, claims and lease calls, so that the
// calls made meanwhile queue. queued reports how many wait; release frees
// the senders and sends what waits, before it returns.
func Hold(d *Driver) (queued func() int, release func()) {
	hold(d.gets)
	hold(d.claims)
	hold(d.leases)
	queued = func() int { return waiting(d.gets) + waiting(d.claims) + waiting(d.leases) }
	release = func() {
		free(d.gets)
		free(d.claims)
		free(d.leases)
	}
	return queued, release
}

func hold[Q, R any](b *batcher[Q, R]) {
	b.mu.Lock()
	b.busy += b.limit
	b.mu.Unlock()
}

func waiting[Q, R any](b *batcher[Q, R]) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

func free[Q, R any](b *batcher[Q, R]) {
	b.mu.Lock()
	b.busy -= b.limit - 1 // one sender stays busy: this one
	b.mu.Unlock()
	b.send(nil)
}

// BatchAlways makes d send a claim or lease call made alone through the
// batch's script too, as a batch of one, so that the conformance suite
// checks that script whole.
func BatchAlways(d *Driver) {
	d.claims.one = nil
	d.leases.one = nil
}
