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
		Catches: "a fault of the scenario that never fired: the run proves nothing about it. The finding does not fail the run; a test fails on it. A fault profile's fault that matched no request of the controller is listed apart (Result.Inapplicable): a test whose profile's faults all did so is skipped, saying so.",
		Reads:   "the firings (History.Faults) against the scenario's faults",
		judge:   judgeUnfired,
	}
}

func judgeUnfired(j *judging) {
	for _, i := range unfired(j.c.Faults, j.h.Faults) {
		spec := j.c.Faults[i]
		name := spec.Fault
		if spec.Target.Resource != "" {
			name += " on " + spec.Target.Resource
		}
		if spec.Controller != "" {
			name += " of " + spec.Controller
		}
		name = fmt.Sprintf("fault %d (%s)", i, name)
		detail := name
		if p := j.c.Faults[i].Profile; p != "" {
			j.v.Inapplicable = append(j.v.Inapplicable, name)
			detail += fmt.Sprintf(": the %s profile's fault matched no request of the controller", p)
		} else {
			j.v.Unfired = append(j.v.Unfired, name)
		}
		j.add(reports.Finding{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: detail})
	}
}

// unfired are the indexes in specs of the faults no firing came from.
func unfired(specs []chaos.Spec, firings []chaos.Firing) []int {
	var out []int
	for i, spec := range specs {
		in, err := spec.Build()
		if err != nil {
			continue
		}
		fired := slices.ContainsFunc(firings, func(f chaos.Firing) bool {
			return f.Fault == spec.Fault && f.Target.Equal(in.Fault.Target()) && f.Controller == spec.Controller
		})
		if !fired {
			out = append(out, i)
		}
	}
	return out
}
