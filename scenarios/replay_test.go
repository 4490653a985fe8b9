package scenarios_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

// TestSameSeedSameFaults runs every faulted fake scenario twice with one
// seed and checks that the faults hit the same points. A run is not
// reproduced bit for bit: concurrent workers and reflectors race at one
// virtual instant, so two runs need not make the same requests. What a
// seed fixes is the decision at each point both runs reached:
//   - a fault decided per request (a probability, or every match in its
//     window) fired on the same matches of each request: if both runs made
//     the k-th PATCH of web-1, both or neither were answered with a 409;
//   - a fault bounded by count or nth fired as many times in both;
//   - a window opened at the same virtual instant after the first start of
//     the controller the fault is in (its injector's clock starts there).
//
// A second seed must move the per-request decisions, or the first check
// could not fail.
func TestSameSeedSameFaults(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	for _, s := range all {
		if !s.RunsOn(fake.Name) || len(s.Faults) == 0 {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			a, b, other := runFaults(t, s, 7), runFaults(t, s, 7), runFaults(t, s, 8)
			compared := 0
			for i, spec := range s.Faults {
				fa, fb := a.of(t, spec), b.of(t, spec)
				require.NotEmptyf(t, fa, "fault %d (%s) never fired: the scenario proves nothing about it", i, spec.Fault)
				w := spec.When
				switch {
				case w.Nth > 0 || w.Count > 0:
					require.Equalf(t, len(fa), len(fb), "fault %d (%s), bounded by count or nth, fired a different number of times", i, spec.Fault)
				case w.After > 0:
					require.Equalf(t, fa[0].at, fb[0].at, "fault %d (%s): its window opened at a different instant", i, spec.Fault)
				default:
					n, diff := compare(fa, fb)
					require.Emptyf(t, diff, "fault %d (%s) fired on different matches with one seed", i, spec.Fault)
					compared += n
					if w.Probability > 0 {
						require.NotEqualf(t, fa, other.of(t, spec), "fault %d (%s): seeds 7 and 8 fired alike", i, spec.Fault)
					}
				}
			}
			t.Logf("%d firings; %d per-request decisions compared", len(a.firings), compared)
		})
	}
}

type firing struct {
	at      time.Duration
	request string
	match   int
}

// faultLog holds a run's firings and, by controller, when its first
// instance started: its injectors measure windows from there, and how long
// the run's setup took before it varies with goroutine order.
type faultLog struct {
	firings []chaos.Firing
	started map[string]time.Time
}

func (l faultLog) of(t *testing.T, spec chaos.Spec) []firing {
	in, err := spec.Build()
	require.NoError(t, err)
	var out []firing
	for _, f := range l.firings {
		if f.Fault == spec.Fault && f.Target.Equal(in.Fault.Target()) {
			out = append(out, firing{f.At.Sub(l.started[f.Controller]), f.Request, f.Match})
		}
	}
	return out
}

func runFaults(t *testing.T, s *scenarios.Scenario, seed uint64) faultLog {
	var res *reports.Result
	synctest.Test(t, func(t *testing.T) {
		res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: seed, Controller: scaler.For(s)})
	})
	require.Empty(t, res.Error)
	started := map[string]time.Time{}
	for _, l := range res.History.Lives {
		if at, ok := started[l.Controller]; !ok || l.Started.Before(at) {
			started[l.Controller] = l.Started
		}
	}
	return faultLog{res.History.Faults, started}
}

// compare checks that, for each request, the matches both runs reached
// fired alike. It returns how many firings it compared and the first
// difference.
func compare(a, b []firing) (int, string) {
	matches := func(fs []firing) map[string][]int {
		m := map[string][]int{}
		for _, f := range fs {
			m[f.request] = append(m[f.request], f.match)
		}
		return m
	}
	ma, mb := matches(a), matches(b)
	n := 0
	for req, ka := range ma {
		kb := mb[req]
		if len(kb) == 0 {
			continue
		}
		slices.Sort(ka)
		slices.Sort(kb)
		reached := min(ka[len(ka)-1], kb[len(kb)-1])
		upTo := func(ks []int) []int {
			return slices.DeleteFunc(slices.Clone(ks), func(k int) bool { return k > reached })
		}
		if !slices.Equal(upTo(ka), upTo(kb)) {
			return n, fmt.Sprintf("%q fired on matches %v in one run, %v in the other", req, upTo(ka), upTo(kb))
		}
		n += len(upTo(ka))
	}
	return n, ""
}
