package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// column is everything measured at one size.
type column struct {
	size    int
	results []result
	bytes   int64
	fill    time.Duration
}

// report prints the measurements as a Markdown table: an operation per row,
// p50 and p99 per size, and the ratio of the p50 at the largest size to the
// smallest.
func report(w io.Writer, cols []column) error {
	var b strings.Builder
	b.WriteString("| operation |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s p50 | %s p99 |", count(c.size), count(c.size))
	}
	last := len(cols) - 1
	if last > 0 {
		fmt.Fprintf(&b, " p50 %s÷%s |", count(cols[last].size), count(cols[0].size))
	}
	b.WriteString("\n|---|")
	for range cols {
		b.WriteString("---:|---:|")
	}
	if last > 0 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for i, r := range cols[0].results {
		fmt.Fprintf(&b, "| %s |", r.op)
		for _, c := range cols {
			fmt.Fprintf(&b, " %s | %s |", dur(c.results[i].p50), dur(c.results[i].p99))
		}
		if last > 0 {
			fmt.Fprintf(&b, " %.2f× |", float64(cols[last].results[i].p50)/float64(cols[0].results[i].p50))
		}
		b.WriteString("\n")
	}
	b.WriteString("| bytes per 1,000 records |")
	for _, c := range cols {
		if c.bytes < 0 {
			b.WriteString(" n/a | |")
			continue
		}
		fmt.Fprintf(&b, " %s | |", size(c.bytes*1000/int64(c.size)))
	}
	if last > 0 {
		b.WriteString(" |")
	}
	b.WriteString("\n| fill time (cumulative) |")
	var total time.Duration
	for _, c := range cols {
		total += c.fill
		fmt.Fprintf(&b, " %s | |", total.Round(100*time.Millisecond))
	}
	if last > 0 {
		b.WriteString(" |")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// count writes 10000 as 10K and 1000000 as 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return fmt.Sprint(n)
}

// dur writes a latency with three significant digits in µs or ms.
func dur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us >= 10000:
		return fmt.Sprintf("%.0f ms", us/1000)
	case us >= 1000:
		return fmt.Sprintf("%.1f ms", us/1000)
	case us >= 100:
		return fmt.Sprintf("%.0f µs", us)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// size writes a byte count in KB or MB (powers of 1000).
func size(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.0f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
