package main

import (
	"fmt"
	"io"
	"slices"
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
	round   int
}

// report prints the table, and with an echo backend the MCP rows'
// calls/s over echo's in the same round and the median of those ratios
// over the rounds. It returns an error if any call failed.
func report(w io.Writer, rows []row) error {
	echo := map[[2]int]float64{}          // round, clients → echo calls/s
	echoSrv := map[[2]int]time.Duration{} // round, clients → echo's server CPU per call
	for _, r := range rows {
		if r.backend == echoName {
			echo[[2]int{r.round, r.clients}] = r.r.perSecond()
			echoSrv[[2]int{r.round, r.clients}] = r.r.srvPerCall()
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tbackend\tclients\tpath\tcalls/s\tp50\tp99\terrors\tcalls/s store÷mcp\tp50 mcp÷store\tcalls/s ÷echo\tcpu/call\tsrv/call\tsrv ÷echo\t")
	var failed error
	ratios := map[string][]float64{} // backend and clients → ratios to echo
	srvRatios := map[string][]float64{}
	var keys []string
	for _, r := range rows {
		rate, lat, toEcho := "", "", ""
		if r.base != nil && r.r.perSecond() > 0 && r.base.p50 > 0 {
			rate = fmt.Sprintf("%.1f×", r.base.perSecond()/r.r.perSecond())
			lat = fmt.Sprintf("%.1f×", float64(r.r.p50)/float64(r.base.p50))
		}
		if e := echo[[2]int{r.round, r.clients}]; e > 0 && r.path == "mcp-http" && r.backend != echoName {
			q := r.r.perSecond() / e
			toEcho = fmt.Sprintf("%.2f×", q)
			k := fmt.Sprintf("%s at %d clients", r.backend, r.clients)
			if ratios[k] == nil {
				keys = append(keys, k)
			}
			ratios[k] = append(ratios[k], q)
		}
		srv, srvEcho := "", ""
		if r.r.srv > 0 {
			srv = r.r.srvPerCall().Round(100 * time.Nanosecond).String()
			if e := echoSrv[[2]int{r.round, r.clients}]; e > 0 && r.backend != echoName {
				q := float64(r.r.srvPerCall()) / float64(e)
				srvEcho = fmt.Sprintf("%.2f×", q)
				k := fmt.Sprintf("%s at %d clients", r.backend, r.clients)
				srvRatios[k] = append(srvRatios[k], q)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.round, r.backend, r.clients, r.path,
			r.r.perSecond(), round(r.r.p50), round(r.r.p99), r.r.errors, rate, lat, toEcho, r.r.cpuPerCall().Round(100*time.Nanosecond),
			srv, srvEcho)
		if r.r.errors > 0 && failed == nil {
			failed = fmt.Errorf("%s with %d clients on %s: %d calls failed, the first: %w",
				r.path, r.clients, r.backend, r.r.errors, r.r.firstErr)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range keys {
		q := slices.Clone(ratios[k])
		slices.Sort(q)
		fmt.Fprintf(w, "mcp-http calls/s ÷ echo, %s: median %.2f× of %d rounds (min %.2f×, max %.2f×)\n",
			k, q[len(q)/2], len(q), q[0], q[len(q)-1])
		if q := slices.Clone(srvRatios[k]); len(q) > 0 {
			slices.Sort(q)
			fmt.Fprintf(w, "server CPU per call ÷ echo's, %s: median %.2f× of %d rounds (min %.2f×, max %.2f×)\n",
				k, q[len(q)/2], len(q), q[0], q[len(q)-1])
		}
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
