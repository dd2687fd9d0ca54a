package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// row is one line of the table; base, for an MCP row, is the in-process
// measurement of the same backend and concurrency.
type row struct {
	backend string
	clients int
	path    string
	r       result
	base    *result
}

// report prints the table and returns an error if any call failed.
func report(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tclients\tpath\tcalls/s\tp50\tp99\terrors\tcalls/s store÷mcp\tp50 mcp÷store\t")
	var failed error
	for _, r := range rows {
		rate, lat := "", ""
		if r.base != nil && r.r.perSecond() > 0 && r.base.p50 > 0 {
			rate = fmt.Sprintf("%.1f×", r.base.perSecond()/r.r.perSecond())
			lat = fmt.Sprintf("%.1f×", float64(r.r.p50)/float64(r.base.p50))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%d\t%s\t%s\t\n", r.backend, r.clients, r.path,
			r.r.perSecond(), round(r.r.p50), round(r.r.p99), r.r.errors, rate, lat)
		if r.r.errors > 0 && failed == nil {
			failed = fmt.Errorf("%s with %d clients on %s: %d calls failed, the first: %w",
				r.path, r.clients, r.backend, r.r.errors, r.r.firstErr)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return failed
}

// round keeps three significant digits or so.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d
}
