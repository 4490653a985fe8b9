package check

import (
	"fmt"

	"github.com/converge-lab/converge/reports"
)

// OneWriterAtATime breaks on a write by one instance while another that
// wrote before it still runs.
const OneWriterAtATime = "one-writer-at-a-time"

func oneWriterAtATime() Check {
	return Check{
		Name: OneWriterAtATime, Kind: reports.KindInvariant, Invariant: true,
		Catches: "a write by one instance while another that wrote before it was still running: a failover without fencing.",
		Reads:   "the successful writes by instance (History.Requests) and the instances' lives (History.Lives)",
		judge:   judgeOneWriter,
	}
}

func judgeOneWriter(j *judging) {
	last, any := -1, false
	for i, q := range j.h.Requests {
		if !SuccessfulWrite(q) {
			continue
		}
		if any && last != q.Instance && j.running(last, i) {
			j.find(Finding(OneWriterAtATime, q.At, RequestSubject(q), &q, fmt.Sprintf("instance %d wrote %s while instance %d, which wrote before it, was still running", q.Instance, q.Name, last)))
		}
		last, any = q.Instance, true
	}
}

// running: instance idx had not ended when the history held n requests.
func (j *judging) running(idx, n int) bool {
	for _, l := range j.h.Lives {
		if l.Instance == idx {
			return l.Ended.IsZero() || l.Requests > n
		}
	}
	return false
}
