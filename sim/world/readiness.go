package world

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// Kinds of readiness model.
const (
	ReadyAfterDelay = "ready-after-delay"
	NeverReady      = "never-ready"
	FractionNever   = "fraction-never-ready"
	Flapping        = "flapping"
	CapacityLimited = "capacity-limited"
	CrashLooping    = "crash-looping"
)

// Model says when a simulated pod is ready. It is data: a scenario names one
// and sets its numbers. Randomness (jitter, which pods never become ready)
// is drawn per pod from the world's seed and the pod's name, so a run
// replays exactly.
type Model struct {
	// Kind is one of the constants above.
	Kind string `json:"kind"`
	// Delay from the pod starting to it first being ready.
	Delay time.Duration `json:"delay,omitempty"`
	// Jitter adds up to this much to Delay, per pod.
	Jitter time.Duration `json:"jitter,omitempty"`
	// Fraction of pods that never become ready (fraction-never-ready).
	Fraction float64 `json:"fraction,omitempty"`
	// Period of a flap (flapping: ready for Period, unready for Period) or
	// of a crash (crash-looping: the container restarts every Period).
	Period time.Duration `json:"period,omitempty"`
	// PerNode caps ready pods per node (capacity-limited).
	PerNode int `json:"perNode,omitempty"`
}

// Validate checks the model's numbers for its kind.
func (m Model) Validate() error {
	var errs []error
	if m.Delay < 0 || m.Jitter < 0 || m.Period < 0 {
		errs = append(errs, errors.New("delay, jitter and period must not be negative"))
	}
	switch m.Kind {
	case ReadyAfterDelay, NeverReady:
	case FractionNever:
		if m.Fraction < 0 || m.Fraction > 1 {
			errs = append(errs, fmt.Errorf("fraction must be within [0, 1], got %v", m.Fraction))
		}
	case Flapping, CrashLooping:
		if m.Period <= 0 {
			errs = append(errs, fmt.Errorf("%s needs a positive period", m.Kind))
		}
	case CapacityLimited:
		if m.PerNode < 0 {
			errs = append(errs, fmt.Errorf("perNode must not be negative, got %d", m.PerNode))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown readiness model %q", m.Kind))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("readiness model: %w", err)
	}
	return nil
}

// PodState is what the model says of one pod at one instant.
type PodState struct {
	Ready bool
	// Restarts is the container's restart count (crash-looping).
	Restarts int32
	// Next is when the state may change next; zero means never by itself.
	Next time.Duration
}

// State evaluates the model for a pod that started at started, seen at now.
// readyOnNode is the number of other ready pods on its node.
func (m Model) State(seed int64, pod string, started, now time.Time, readyOnNode int) PodState {
	age := now.Sub(started)
	delay := m.Delay
	if m.Jitter > 0 {
		delay += time.Duration(draw(seed, pod, "jitter") * float64(m.Jitter))
	}
	untilReady := func() PodState {
		if age >= delay {
			return PodState{Ready: true}
		}
		return PodState{Next: delay - age}
	}
	switch m.Kind {
	case ReadyAfterDelay:
		return untilReady()
	case FractionNever:
		if draw(seed, pod, "never") < m.Fraction {
			return PodState{}
		}
		return untilReady()
	case Flapping:
		if age < delay {
			return PodState{Next: delay - age}
		}
		into := (age - delay) % (2 * m.Period)
		if into < m.Period {
			return PodState{Ready: true, Next: m.Period - into}
		}
		return PodState{Next: 2*m.Period - into}
	case CapacityLimited:
		s := untilReady()
		if s.Ready && readyOnNode >= m.PerNode {
			// Re-checked when another pod on the node changes, and
			// periodically in case none does.
			return PodState{Next: max(m.Delay, time.Second)}
		}
		return s
	case CrashLooping:
		restarts := int32(age / m.Period)
		return PodState{Restarts: restarts, Next: m.Period - age%m.Period}
	}
	return PodState{} // never-ready, and anything Validate rejects
}

// draw is a number in [0, 1) fixed by the seed, the pod and the purpose.
func draw(seed int64, pod, purpose string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s", seed, pod, purpose)
	return float64(h.Sum64()>>11) / float64(1<<53)
}
