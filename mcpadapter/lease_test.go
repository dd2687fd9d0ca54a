package mcpadapter_test

import (
	"strconv"
	"testing"
	"time"
)

func TestLeases(t *testing.T) {
	c, _, clk := newClient(t, nil)
	a := c.ok("lease_acquire", `{"resource_id":"pr:42","holder_id":"A","ttl_seconds":60}`)
	fence := field(t, a, "fence")
	equal(t, "lease_acquire", a, `{"acquired":true,"resource_id":"pr:42","holder":"A","expires_at":1893456060.0,"reason":null,"fence":`+fence+`}`)
	equal(t, "lease_acquire by another holder", c.ok("lease_acquire", `{"resource_id":"pr:42","holder_id":"B","ttl_seconds":60}`),
		`{"acquired":false,"resource_id":"pr:42","holder":"A","expires_at":1893456060.0,"reason":"Held by 'A'","fence":null}`)

	clk.Advance(10 * time.Second)
	equal(t, "lease_acquire by the holder extends it", c.ok("lease_acquire", `{"resource_id":"pr:42","holder_id":"A","ttl_seconds":60}`),
		`{"acquired":true,"resource_id":"pr:42","holder":"A","expires_at":1893456070.0,"reason":null,"fence":`+fence+`}`)
	equal(t, "lease_renew", c.ok("lease_renew", `{"resource_id":"pr:42","holder_id":"A","ttl_seconds":30.125}`),
		`{"renewed":true,"resource_id":"pr:42","expires_at":1893456040.125}`)
	equal(t, "lease_renew by another holder", c.ok("lease_renew", `{"resource_id":"pr:42","holder_id":"B","ttl_seconds":30}`),
		`{"renewed":false,"resource_id":"pr:42","expires_at":null}`)
	equal(t, "lease_release by another holder", c.ok("lease_release", `{"resource_id":"pr:42","holder_id":"B"}`),
		`{"released":false,"resource_id":"pr:42"}`)

	clk.Advance(30125 * time.Millisecond) // A's lease expires
	equal(t, "lease_release of an expired lease", c.ok("lease_release", `{"resource_id":"pr:42","holder_id":"A"}`),
		`{"released":false,"resource_id":"pr:42"}`)
	equal(t, "lease_renew of an expired lease", c.ok("lease_renew", `{"resource_id":"pr:42","holder_id":"A","ttl_seconds":30}`),
		`{"renewed":false,"resource_id":"pr:42","expires_at":null}`)
	b := c.ok("lease_acquire", `{"resource_id":"pr:42","holder_id":"B","ttl_seconds":5}`)
	if field(t, b, "acquired") != "true" || atoi(t, field(t, b, "fence")) <= atoi(t, fence) {
		t.Errorf("takeover = %s, want acquired with a fence above %s", b, fence)
	}
	equal(t, "lease_release", c.ok("lease_release", `{"resource_id":"pr:42","holder_id":"B"}`), `{"released":true,"resource_id":"pr:42"}`)
	equal(t, "second lease_release", c.ok("lease_release", `{"resource_id":"pr:42","holder_id":"B"}`), `{"released":false,"resource_id":"pr:42"}`)
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s is not an integer", s)
	}
	return n
}
