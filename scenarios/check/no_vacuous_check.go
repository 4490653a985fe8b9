package check

import (
	"fmt"
	"slices"

	"github.com/converge-lab/converge/reports"
)

// NoVacuousCheck names the check of checks that could not fail.
const NoVacuousCheck = "no-vacuous-check"

func noVacuousCheck() Check {
	return Check{
		Name: NoVacuousCheck, Kind: reports.KindUnfired,
		Catches: "an invariant of the scenario that selected no object, or was never true or false of one because every object it selected lacked a field it reads (a typo in a field's name), and a write rule that selected no write: like a fault that never fired, the run proves nothing about it. The finding does not fail the run; it fails the test, unless the invariant or rule says `mayBeVacuous` or the scenario allows this check.",
		Reads:   "what the invariants and writes-allowed checks judged (History.Events, History.Requests)",
		judge:   judgeVacuous,
	}
}

// judgeVacuous runs after the invariants and writes-allowed: it reads what
// they judged.
func judgeVacuous(j *judging) {
	if slices.Contains(j.c.Allow, NoVacuousCheck) {
		return
	}
	vacuous := func(what string) {
		j.v.Unfired = append(j.v.Unfired, what)
		j.add(reports.Finding{Check: NoVacuousCheck, Kind: reports.KindUnfired, Detail: what})
	}
	for _, inv := range j.c.invariants {
		switch {
		case inv.MayBeVacuous:
		case !j.selected[inv.Name]:
			vacuous(fmt.Sprintf("invariant %s (selected no %s)", inv.Name, inv.Select.Kind))
		case !j.evaluated[inv.Name]:
			vacuous(fmt.Sprintf("invariant %s (never true or false: each %s it selected lacked a field its rule reads)", inv.Name, inv.Select.Kind))
		}
	}
	for i, rule := range j.c.Writes {
		if !rule.MayBeVacuous && !j.ruled[i] {
			vacuous(fmt.Sprintf("write rule %d (selected no write of a %s)", i, rule.Select.Kind))
		}
	}
}
