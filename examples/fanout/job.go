package main

import (
	"context"
	"fmt"
	"strconv"
)

// The job: the sum of the squares of 1..100·N, cut into N items of 100
// numbers; a worker does an item in steps of 25 numbers and checkpoints
// the running sum after each step, so that a successor resumes where a
// crashed worker stopped. The answer is known in closed form, so the
// aggregate can be checked.
const (
	itemSize  = 100
	stepCount = 4 // steps of work per item; step stepCount+1 finishes the run
	stepSize  = itemSize / stepCount
)

// Tags and keys of a job named job.
func jobTags(job string) map[string]any { return map[string]any{"example": "fanout", "job": job} }
func resultKey(job string, item int) string {
	return "fanout/" + job + "/result/" + strconv.Itoa(item)
}
func reportKey(job string) string { return "fanout/" + job + "/report" }

// stepSum is the work of one step: the sum of the squares of the step's
// numbers (step 1..stepCount of item).
func stepSum(item, step int) int64 {
	var s int64
	first := item*itemSize + (step-1)*stepSize + 1
	for n := first; n < first+stepSize; n++ {
		s += int64(n) * int64(n)
	}
	return s
}

// expectedTotal is the job's answer: the sum of the squares of 1..100·n.
func expectedTotal(n int) int64 {
	m := int64(n * itemSize)
	return m * (m + 1) * (2*m + 1) / 6
}

// A fanOut is a job's join parent and its children, one per item.
type fanOut struct {
	Parent   string   `json:"parent"`
	Children []string `json:"children"`
	Replayed int      `json:"replayed"` // how many creates the idempotency keys answered with an existing run
}

// createFanOut creates the job's join parent and its n children. Each
// create carries an idempotency key derived from the job, so an
// orchestrator that restarts (or retries after a lost answer) gets the same
// runs back instead of a second set. All children exist before any worker
// starts, so the parent cannot release between two of them.
func createFanOut(ctx context.Context, c *sidecarClient, job string, n int) (fanOut, error) {
	var f fanOut
	var p createResult
	if err := c.call(ctx, "workflow_create", map[string]any{"name": "fanout " + job, "tags": jobTags(job),
		"join": true, "idempotency_key": "fanout/" + job + "/parent"}, &p); err != nil {
		return f, err
	}
	f.Parent = p.RunID
	if p.Replayed {
		f.Replayed++
	}
	for i := range n {
		tags := jobTags(job)
		tags["item"] = strconv.Itoa(i)
		var ch createResult
		if err := c.call(ctx, "workflow_create", map[string]any{"name": fmt.Sprintf("fanout %s item %d", job, i), "tags": tags,
			"parent_run_id": f.Parent, "idempotency_key": fmt.Sprintf("fanout/%s/item/%d", job, i)}, &ch); err != nil {
			return f, err
		}
		f.Children = append(f.Children, ch.RunID)
		if ch.Replayed {
			f.Replayed++
		}
	}
	return f, nil
}
