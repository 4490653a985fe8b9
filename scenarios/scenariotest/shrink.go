package scenariotest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
)

// ShrinkOptions adjust Shrink.
type ShrinkOptions struct {
	// MaxCandidates bounds the schedules tried, each in explore.Tries
	// seeded runs; zero means the default.
	MaxCandidates int
	// Dir receives the shrunk scenario and shrunk.json; empty means the
	// result's folder.
	Dir string
	// Others are the Go values of the other controllers the scenario runs
	// beside c, by name.
	Others map[string]scenarios.Controller
}

// ShrinkOutcome is what Shrink leaves.
type ShrinkOutcome struct {
	*explore.Shrunk
	// File is the scenario with the shrunk schedule, which failed when run
	// with Seed.
	File   string `json:"file"`
	Replay string `json:"replay"`
}

// Shrink reduces the failing run r to a 1-minimal schedule of faults that
// still fails with controller c, on fake, each candidate in explore.Tries
// seeded runs (r's seed and the next ones) and failing in as many of them
// as r's own schedule does. The shrunk scenario is written beside r (or
// into o.Dir) with the command that replays a seed that failed with it.
func Shrink(t *testing.T, r *reports.Result, c scenarios.Controller, o ShrinkOptions) (*ShrinkOutcome, error) {
	t.Helper()
	var s scenarios.Scenario
	if err := json.Unmarshal(r.Spec, &s); err != nil || s.Name == "" {
		return nil, fmt.Errorf("the result holds no scenario to shrink (%v)", err)
	}
	sh := &explore.Shrinker{MaxCandidates: o.MaxCandidates}
	n := 0
	sh.Fails = func(faults []chaos.Spec, need int) ([]uint64, int, error) {
		cand := s
		cand.Faults = faults
		if err := cand.Validate(); err != nil {
			return nil, 0, err
		}
		n++
		var failed []uint64
		runs := 0
		for i := range uint64(explore.Tries) {
			if need > 0 && (len(failed) >= need || len(failed)+explore.Tries-int(i) < need) {
				break
			}
			seed := r.Seed + i
			var res *reports.Result
			t.Run(fmt.Sprintf("candidate-%d/seed-%d", n, seed), func(t *testing.T) {
				res = RunFake(t, &cand, scenarios.Options{Seed: seed, Controller: c, Others: o.Others})
			})
			runs++
			if res == nil {
				return nil, runs, fmt.Errorf("candidate %d did not run", n)
			}
			if res.Error != "" {
				return nil, runs, fmt.Errorf("candidate %d could not be carried out: %s", n, strings.SplitN(res.Error, "\n", 2)[0])
			}
			if !res.Pass {
				failed = append(failed, seed)
			}
		}
		return failed, runs, nil
	}
	out, err := sh.Shrink(r)
	if err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	shrunk := s
	shrunk.Name = shrunkName(s.Name)
	shrunk.Faults = out.Faults
	shrunk.Description = fmt.Sprintf("%s, shrunk from %d faults to %d in %d runs", s.Name, len(out.From), len(out.Faults), out.Runs)
	file := filepath.Join(dir, shrunk.Name+".yaml")
	if err := writeScenario(file, &shrunk); err != nil {
		return nil, err
	}
	root, _, _ := strings.Cut(t.Name(), "/")
	so := &ShrinkOutcome{Shrunk: out, File: file, Replay: fileReplay(current(t), root, shrunk.Name, out.Seed, file)}
	b, err := json.MarshalIndent(so, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "shrunk.json"), b, 0o644)
	}
	return so, err
}

func shrunkName(name string) string {
	const suffix = "-shrunk"
	if len(name)+len(suffix) > scenarios.MaxNameLength {
		name = strings.TrimRight(name[:scenarios.MaxNameLength-len(suffix)], "-")
	}
	return name + suffix
}

// shrinkFlag shrinks the result -converge.shrink names, with the
// controller of the scenario of that name in list (or of the first).
func shrinkFlag(t *testing.T, inv invocation.Invocation, list []*scenarios.Scenario, controllerFor func(*scenarios.Scenario) scenarios.Controller, others map[string]scenarios.Controller) {
	t.Helper()
	r, err := reports.Read(inv.Shrink)
	if err != nil {
		t.Fatal(err)
	}
	var s *scenarios.Scenario
	for _, l := range list {
		if l.Name == r.Scenario || s == nil {
			s = l
		}
	}
	if s == nil {
		var own scenarios.Scenario
		if err := json.Unmarshal(r.Spec, &own); err != nil {
			t.Fatalf("%s holds no scenario: %v", inv.Shrink, err)
		}
		s = &own
	}
	dir := inv.Report
	if dir == "" {
		dir = filepath.Dir(inv.Shrink)
	}
	out, err := Shrink(t, r, controllerFor(s), ShrinkOptions{Dir: dir, Others: others})
	if err != nil {
		t.Fatalf("shrinking %s: %v", inv.Shrink, err)
	}
	var faults []string
	for _, f := range out.Faults {
		b, _ := json.Marshal(f)
		faults = append(faults, string(b))
	}
	t.Logf("shrunk %s from %d faults to %d in %d runs (%d schedules tried):\n  %s\nscenario: %s\nreplay: %s",
		inv.Shrink, len(out.From), len(out.Faults), out.Runs, out.Candidates, strings.Join(faults, "\n  "), out.File, out.Replay)
	if out.Exhausted {
		t.Logf("the budget ran out before a fixed point: the schedule is smaller, but may not be 1-minimal")
	}
}
