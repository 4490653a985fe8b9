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
		Catches: "a write by one instance while another of the same controller that wrote before it was still running: a failover without fencing. Each controller of the scenario is judged on its own instances.",
		Reads:   "the successful writes by controller and instance (History.Requests) and the instances' lives (History.Lives)",
		judge:   judgeOneWriter,
	}
}

func judgeOneWriter(j *judging) {
	last := map[string]int{} // each controller's last writer
	for i, q := range j.h.Requests {
		if !SuccessfulWrite(q) {
			continue
		}
		if prev, ok := last[q.Controller]; ok && prev != q.Instance && j.running(prev, i) {
			of := ""
			if q.Controller != "" {
				of = " of " + q.Controller
			}
			j.find(Finding(OneWriterAtATime, q.At, RequestSubject(q), &q, fmt.Sprintf("instance %d%s wrote %s while instance %d, which wrote before it, was still running", q.Instance, of, q.Name, prev)))
		}
		last[q.Controller] = q.Instance
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
