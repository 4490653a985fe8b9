package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/converge-lab/converge/chaos"
)

// firingsFor sends n patch requests through a plan with one injection and
// returns which of them the fault answered.
func firingsFor(t *testing.T, seed uint64, when chaos.When, clk *testingclock.FakeClock, n int, step time.Duration) []int {
	t.Helper()
	log := &chaos.Log{}
	inj, err := chaos.NewInjector(chaos.Plan{Seed: seed, Recorder: log, Clock: clk,
		Injections: []chaos.Injection{{Fault: chaos.Conflict(chaos.Target{Resource: "deployments"}), When: when}}})
	require.NoError(t, err)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	rt := inj.Wrap(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		ok.ServeHTTP(rec, req)
		return rec.Result(), nil
	}))
	var fired []int
	for i := range n {
		req := httptest.NewRequest(http.MethodPatch, "https://k8s/apis/apps/v1/namespaces/a/deployments/web", bytes.NewReader(nil))
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		if resp.StatusCode == http.StatusConflict {
			fired = append(fired, i)
		}
		clk.Step(step)
	}
	require.Len(t, log.Firings(), len(fired), "every firing is recorded")
	for j, f := range log.Firings() {
		require.Equal(t, fired[j]+1, f.Match, "every request is the same PATCH: the i-th is its match i+1")
	}
	return fired
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWhen(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		when chaos.When
		want []int
	}{
		{"every match", chaos.When{}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"the 3rd match only", chaos.When{Nth: 3}, []int{2}},
		{"at most twice", chaos.When{Count: 2}, []int{0, 1}},
		{"a window from 3s to 6s", chaos.When{After: 3 * time.Second, Until: 6 * time.Second}, []int{3, 4, 5}},
		// Nth counts inside the window: the 2nd match from 3 s on, whatever
		// matched before it.
		{"the 2nd match from 3s on", chaos.When{After: 3 * time.Second, Nth: 2}, []int{4}},
		{"the 3rd match of a window that holds two", chaos.When{After: 3 * time.Second, Until: 5 * time.Second, Nth: 3}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, firingsFor(t, 1, tt.when, testingclock.NewFakeClock(t0), 10, time.Second))
		})
	}
}

func TestSameSeedSameFirings(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	half := chaos.When{Probability: 0.5}
	a := firingsFor(t, 42, half, testingclock.NewFakeClock(t0), 1000, time.Millisecond)
	b := firingsFor(t, 42, half, testingclock.NewFakeClock(t0), 1000, time.Millisecond)
	c := firingsFor(t, 43, half, testingclock.NewFakeClock(t0), 1000, time.Millisecond)
	assert.Equal(t, a, b, "same seed, same requests answered")
	assert.NotEqual(t, a, c, "another seed, another schedule")
	assert.InDelta(t, 500, len(a), 60)
}

// The draw for a request depends on the request and how often it came
// before, not on the order in which concurrent clients' requests arrive: the
// k-th PATCH of web-3 meets the same fate whether the workers ran in turn or
// all at once.
func TestSameSeedSameFiringsWhateverTheOrder(t *testing.T) {
	const keys, perKey = 8, 25
	decide := func(concurrent bool) map[string][]bool {
		inj, err := chaos.NewInjector(chaos.Plan{Seed: 42, Injections: []chaos.Injection{{
			Fault: chaos.Conflict(chaos.Target{Resource: "deployments"}), When: chaos.When{Probability: 0.5}}}})
		require.NoError(t, err)
		rt := inj.Wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		}))
		var mu sync.Mutex
		out := map[string][]bool{}
		worker := func(name string) {
			for range perKey {
				req := httptest.NewRequest(http.MethodPatch, "https://k8s/apis/apps/v1/namespaces/a/deployments/"+name, http.NoBody)
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				mu.Lock()
				out[name] = append(out[name], resp.StatusCode == http.StatusConflict)
				mu.Unlock()
			}
		}
		var wg sync.WaitGroup
		for k := range keys {
			name := fmt.Sprintf("web-%d", k)
			if concurrent {
				wg.Go(func() { worker(name) })
			} else {
				worker(name)
			}
		}
		wg.Wait()
		return out
	}
	inTurn := decide(false)
	for range 5 {
		assert.Equal(t, inTurn, decide(true))
	}
}

func TestInvalidPlans(t *testing.T) {
	for _, in := range []chaos.Injection{
		{},
		{Fault: chaos.Conflict(chaos.Target{}), When: chaos.When{Probability: 1.5}},
		{Fault: chaos.Conflict(chaos.Target{}), When: chaos.When{Probability: math.NaN()}},
		{Fault: chaos.Conflict(chaos.Target{}), When: chaos.When{Probability: math.Inf(1)}},
		{Fault: chaos.Conflict(chaos.Target{}), When: chaos.When{Nth: -1}},
		{Fault: chaos.Conflict(chaos.Target{}), When: chaos.When{After: 5 * time.Second, Until: time.Second}},
	} {
		_, err := chaos.NewInjector(chaos.Plan{Injections: []chaos.Injection{in}})
		assert.Error(t, err, "%+v", in)
	}
	_, err := chaos.NewInjector(chaos.Plan{Injections: []chaos.Injection{{Fault: chaos.APIServerRestart(chaos.Target{})}}})
	assert.ErrorContains(t, err, "apiserver-restart needs a control plane")
}

// countingPlane is a ControlPlane that counts what was asked of it.
type countingPlane struct {
	mu                 sync.Mutex
	restarts, compacts int
}

func (c *countingPlane) RestartAPIServer(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restarts++
	return nil
}

func (c *countingPlane) Compact(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.compacts++
	return nil
}

func (c *countingPlane) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts, c.compacts
}

// A scheduled control-plane fault fires at After, then every Every, up to
// Count, on the plan's clock.
func TestScheduledControlPlaneFaults(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cp := &countingPlane{}
	log := &chaos.Log{}
	inj, err := chaos.NewInjector(chaos.Plan{Clock: clk, ControlPlane: cp, Recorder: log, Injections: []chaos.Injection{
		{Fault: chaos.Compaction(chaos.Target{}), When: chaos.When{After: 10 * time.Second, Every: 5 * time.Second, Count: 3}},
		{Fault: chaos.APIServerRestart(chaos.Target{}), When: chaos.When{After: 12 * time.Second}},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	inj.Start(ctx)
	want := []struct{ at, restarts, compacts int }{{9, 0, 0}, {10, 0, 1}, {12, 1, 1}, {14, 1, 1}, {15, 1, 2}, {20, 1, 3}}
	// waiting is how many schedules wait on the clock at second s, once
	// each has done what falls due then: the restart until it fires at 12,
	// the compaction until its third firing at 20.
	waiting := func(s int) int {
		n := 0
		if s < 12 {
			n++
		}
		if s < 20 {
			n++
		}
		return n
	}
	for _, w := range want {
		for {
			s := int(clk.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) / time.Second)
			if s >= w.at {
				break
			}
			// Step only once every schedule waits on the clock again: one
			// still busy would start its wait a step late.
			require.Eventually(t, func() bool { return clk.Waiters() == waiting(s) }, 5*time.Second, time.Millisecond, "schedules waiting at %ds", s)
			clk.Step(time.Second)
		}
		require.Eventually(t, func() bool { r, c := cp.counts(); return r == w.restarts && c == w.compacts },
			5*time.Second, time.Millisecond, "at %ds", w.at)
	}
	require.Eventually(t, func() bool { return !clk.HasWaiters() }, 5*time.Second, time.Millisecond, "both schedules are over")
	cancel()
	inj.Wait()
	assert.Len(t, log.Firings(), 4)
}

// A control-plane fault with a target is a trigger: it fires right after
// the matching request.
func TestTriggeredControlPlaneFault(t *testing.T) {
	cp := &countingPlane{}
	inj, err := chaos.NewInjector(chaos.Plan{ControlPlane: cp, Injections: []chaos.Injection{
		{Fault: chaos.APIServerRestart(chaos.Target{Verbs: []string{"patch"}, Name: "web"}), When: chaos.When{Nth: 2}},
	}})
	require.NoError(t, err)
	rt := inj.Wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	for range 3 {
		_, err := rt.RoundTrip(httptest.NewRequest(http.MethodPatch, "https://k8s/apis/apps/v1/namespaces/a/deployments/web", http.NoBody))
		require.NoError(t, err)
		inj.Wait()
	}
	restarts, _ := cp.counts()
	assert.Equal(t, 1, restarts, "the second PATCH only")
}
