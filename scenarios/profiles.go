package scenarios

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
)

//go:embed faults/*.yaml
var faultsFS embed.FS

// FaultProfiles are the fault scenarios that apply to any controller
// (faults/*.yaml): conflicts, watch 410s, server errors, a crash right
// after the first write, SIGTERM during a burst, leader failover and an API
// server restart. Each holds faults and controller settings only, aimed at
// verbs rather than at resources, and takes its objects, invariants and
// goal from a scenario of the controller's own (see Under).
func FaultProfiles() ([]*Scenario, error) { return LoadFS(faultsFS, "faults") }

// Under returns s with the faults of profile p: named s's name and p's,
// with p's faults after s's own, p's controller settings where it sets
// them, on the backends both run on, and catching what p catches.
// ErrNoCommonBackend: a scenario and a profile share no backend, so the
// scenario cannot run under it.
var ErrNoCommonBackend = errors.New("no backend both run on")

func (s *Scenario) Under(p *Scenario) (*Scenario, error) {
	out := *s
	out.Name = s.Name + "-" + p.Name
	out.Description = p.Description
	out.Catches = p.Catches
	out.Faults = slices.Clone(s.Faults)
	for _, f := range p.Faults {
		f.Profile = p.Name
		out.Faults = append(out.Faults, f)
	}
	out.Backends = nil
	for _, b := range s.RunsOnBackends() {
		if p.RunsOn(b) {
			out.Backends = append(out.Backends, b)
		}
	}
	if len(out.Backends) == 0 {
		return nil, fmt.Errorf("%w: %s runs on %s, %s on %s", ErrNoCommonBackend, s.Name, strings.Join(s.RunsOnBackends(), ", "), p.Name, strings.Join(p.RunsOnBackends(), ", "))
	}
	c := &out.Controller
	c.Instances = max(c.Instances, p.Controller.Instances)
	c.RestartAfter = cmp.Or(p.Controller.RestartAfter, c.RestartAfter)
	c.LeaseDuration = cmp.Or(p.Controller.LeaseDuration, c.LeaseDuration)
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("%s under %s: %w", s.Name, p.Name, err)
	}
	return &out, nil
}
