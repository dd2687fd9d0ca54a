package mcpadapter_test

import (
	"testing"
	"time"
)

func TestStateSetGet(t *testing.T) {
	c, _, clk := newClient(t, nil)
	equal(t, "state_get of a missing key", c.ok("state_get", `{"key":"k"}`),
		`{"key":"k","value":null,"found":false,"version":null,"agent_id":null,"updated_at":null,"expires_at":null}`)

	equal(t, "state_set", c.ok("state_set", `{"key":"k","value":{"b":1,"a":[true,null]},"agent_id":"me"}`), `{"ok":true,"version":1}`)
	equal(t, "state_get", c.ok("state_get", `{"key":"k"}`),
		`{"key":"k","value":{"b":1,"a":[true,null]},"found":true,"version":1,"agent_id":"me","updated_at":`+epoch+`.0,"expires_at":null}`)

	clk.Advance(1500 * time.Millisecond)
	equal(t, "state_set with ttl", c.ok("state_set", `{"key":"k","value":"v","ttl_seconds":2.25}`), `{"ok":true,"version":2}`)
	equal(t, "state_get with ttl", c.ok("state_get", `{"key":"k"}`),
		`{"key":"k","value":"v","found":true,"version":2,"agent_id":null,"updated_at":1893456001.5,"expires_at":1893456003.75}`)
	clk.Advance(2250 * time.Millisecond)
	equal(t, "state_get after the ttl", field(t, c.ok("state_get", `{"key":"k"}`), "found"), "false")
}

func TestStateSetKeepsEveryDigit(t *testing.T) {
	c, _, _ := newClient(t, nil)
	for _, v := range []string{
		`123456789012345678901234567890`,
		`{"id":9007199254740993,"neg":-9223372036854775809,"f":1.000000000000000000001,"e":1E+300}`,
		`[18446744073709551616,0.1,"é\u2028\\"]`,
		`null`,
	} {
		c.ok("state_set", `{"key":"big","value":`+v+`}`)
		equal(t, "value of "+v, field(t, c.ok("state_get", `{"key":"big"}`), "value"), v)
	}
	equal(t, "stored null", c.ok("state_get", `{"key":"big"}`)[:44], `{"key":"big","value":null,"found":true,"vers`)
}

func TestStateSetIfVersion(t *testing.T) {
	c, _, _ := newClient(t, nil)
	equal(t, "create with if_version 0", c.ok("state_set", `{"key":"k","value":1,"if_version":0}`), `{"ok":true,"version":1}`)
	c.wantErr("state_set", `{"key":"k","value":2,"if_version":0}`,
		"version conflict: current version is 1; nothing was written: read the key again (state_get returns its version) and retry with that if_version")
	equal(t, "set with the current version", c.ok("state_set", `{"key":"k","value":2,"if_version":1}`), `{"ok":true,"version":2}`)
	c.wantErr("state_set", `{"key":"new","value":2,"if_version":7}`,
		"version conflict: the key does not exist (current version 0); nothing was written: read the key again (state_get returns its version) and retry with that if_version")
	equal(t, "value after the conflicts", field(t, c.ok("state_get", `{"key":"k"}`), "value"), "2")
}

func TestStateDelete(t *testing.T) {
	c, _, clk := newClient(t, nil)
	equal(t, "delete of a missing key", c.ok("state_delete", `{"key":"k"}`), `{"ok":false}`)
	c.ok("state_set", `{"key":"k","value":1}`)
	c.wantErr("state_delete", `{"key":"k","if_version":5}`,
		"version conflict: current version is 1; nothing was written: read the key again (state_get returns its version) and retry with that if_version")
	equal(t, "delete", c.ok("state_delete", `{"key":"k","if_version":1}`), `{"ok":true}`)
	equal(t, "second delete", c.ok("state_delete", `{"key":"k"}`), `{"ok":false}`)

	c.ok("state_set", `{"key":"t","value":1,"ttl_seconds":1}`)
	clk.Advance(time.Second)
	equal(t, "delete of an expired key", c.ok("state_delete", `{"key":"t"}`), `{"ok":false}`)
}

func TestStateList(t *testing.T) {
	c, _, clk := newClient(t, nil)
	equal(t, "empty list", c.ok("state_list", ``), `{"keys":[],"next_cursor":null}`)
	for _, k := range []string{"b/2", "a/1", "a/3", "A/1", "a%", "a/2"} {
		c.ok("state_set", `{"key":"`+k+`","value":0}`)
	}
	c.ok("state_set", `{"key":"a/0","value":0,"ttl_seconds":1}`)
	clk.Advance(time.Second)
	equal(t, "all keys", c.ok("state_list", `{"prefix":null}`), `{"keys":["A/1","a%","a/1","a/2","a/3","b/2"],"next_cursor":null}`)
	equal(t, "literal, case-sensitive prefix", c.ok("state_list", `{"prefix":"a%"}`), `{"keys":["a%"],"next_cursor":null}`)

	page := c.ok("state_list", `{"prefix":"a/","limit":2}`)
	equal(t, "first page", field(t, page, "keys"), `["a/1","a/2"]`)
	cursor := str(t, page, "next_cursor")
	equal(t, "last page", c.ok("state_list", `{"prefix":"a/","limit":2,"cursor":"`+cursor+`"}`), `{"keys":["a/3"],"next_cursor":null}`)
	c.wantErr("state_list", `{"prefix":"b/","cursor":"`+cursor+`"}`, "cursor belongs to a listing of another prefix")
	c.wantErr("state_list", `{"limit":100000}`, "limit must be between 1 and 10000, got 100000")
}
