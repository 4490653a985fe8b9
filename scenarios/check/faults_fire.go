package check

import (
	"fmt"
	"slices"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

func faultsFire() Check {
	return Check{
		Name: reports.CheckFaultsFire, Kind: reports.KindUnfired,
		Catches: "a fault of the scenario that never fired: the run proves nothing about it. The finding does not fail the run.",
		Reads:   "the firings (History.Faults) against the scenario's faults",
		judge:   judgeUnfired,
	}
}

func judgeUnfired(j *judging) {
	j.v.Unfired = unfired(j.c.Faults, j.h.Faults)
	for _, name := range j.v.Unfired {
		j.add(reports.Finding{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: name})
	}
}

// unfired names the faults of specs that no firing came from, as
// "fault 2 (watch-expired-mid-stream on pods)".
func unfired(specs []chaos.Spec, firings []chaos.Firing) []string {
	var out []string
	for i, spec := range specs {
		in, err := spec.Build()
		if err != nil {
			continue
		}
		fired := slices.ContainsFunc(firings, func(f chaos.Firing) bool {
			return f.Fault == spec.Fault && f.Target.Equal(in.Fault.Target())
		})
		if !fired {
			name := spec.Fault
			if spec.Target.Resource != "" {
				name += " on " + spec.Target.Resource
			}
			out = append(out, fmt.Sprintf("fault %d (%s)", i, name))
		}
	}
	return out
}
