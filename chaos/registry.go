package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/converge-lab/converge/internal/duration"
)

// Spec is an injection as a scenario file writes it: a fault by name, its
// parameters, its target and when it fires.
type Spec struct {
	Fault  string `json:"fault"`
	Target Target `json:"target,omitempty"`
	When   When   `json:"when,omitempty"`
	// RetryAfter (seconds) for throttle and server-error.
	RetryAfter int `json:"retryAfter,omitempty"`
	// Code for server-error (500..599). Zero means 500.
	Code int `json:"code,omitempty"`
	// Delay for latency and watch-delay.
	Delay time.Duration `json:"delay,omitempty"`
	// Lag for time-travel and stale-read: the view as it was this long
	// before the firing.
	Lag time.Duration `json:"lag,omitempty"`
	// Writes for time-travel and stale-read: the view from before the
	// controller's writes-th latest write (1 when neither lag nor writes
	// is set).
	Writes int `json:"writes,omitempty"`
	// Deletions for time-travel and stale-read: the view from before the
	// deletions-th latest deletion the controller's instances were told
	// of (a DELETED watch event): it still holds the deleted object.
	Deletions int `json:"deletions,omitempty"`
	// Hold for time-travel: how long the view stays behind before it
	// catches up (10 s when zero).
	Hold time.Duration `json:"hold,omitempty"`
	// Profile names the fault profile the fault came from, when a
	// scenario runs under one: a profile's fault that matches no request
	// of the controller says the profile does not apply to it, where a
	// scenario's own fault that never fires says the scenario proves
	// nothing.
	Profile string `json:"profile,omitempty"`
	// Controller names the controller whose instances the fault is
	// injected into, when a scenario runs several; empty means the
	// controller under test. The chaos package does not read it: the
	// scenario engine binds each fault to its controller's injector.
	Controller string `json:"controller,omitempty"`
}

// The faults' names, as a Spec and a scenario file write them: code that
// builds a Spec names a fault by one of these, and asks the fault itself
// what it needs and does (Fault.Available, PlaneOf, EndsInstance).
const (
	FaultConflict              = "conflict"
	FaultThrottle              = "throttle"
	FaultServerError           = "server-error"
	FaultLatency               = "latency"
	FaultPartition             = "partition"
	FaultWatchExpired          = "watch-expired"
	FaultWatchExpiredMidStream = "watch-expired-mid-stream"
	FaultWatchDrop             = "watch-drop"
	FaultWatchLost             = "watch-lost"
	FaultWatchDelay            = "watch-delay"
	FaultWatchDuplicate        = "watch-duplicate"
	FaultWatchClose            = "watch-close"
	FaultTombstone             = "tombstone"
	FaultCrash                 = "crash"
	FaultTerminate             = "terminate"
	FaultAPIServerRestart      = "apiserver-restart"
	FaultCompaction            = "compaction"
	FaultTimeTravel            = "time-travel"
	FaultStaleRead             = "stale-read"
)

// registry maps a fault name to how a Spec builds it.
var registry = map[string]func(Spec) (Fault, error){
	FaultConflict: func(s Spec) (Fault, error) { return Conflict(s.Target), nil },
	FaultThrottle: func(s Spec) (Fault, error) {
		if s.RetryAfter < 1 {
			return nil, errors.New("throttle needs retryAfter >= 1 (seconds)")
		}
		return Throttle(s.Target, s.RetryAfter), nil
	},
	FaultServerError: func(s Spec) (Fault, error) {
		code := s.Code
		if code == 0 {
			code = 500
		}
		if code < 500 || code > 599 {
			return nil, fmt.Errorf("server-error code must be within 500..599, got %d", s.Code)
		}
		if s.RetryAfter < 0 {
			return nil, errors.New("retryAfter must not be negative")
		}
		return ServerError(s.Target, code, s.RetryAfter), nil
	},
	FaultLatency: func(s Spec) (Fault, error) {
		if s.Delay <= 0 {
			return nil, errors.New("latency needs a positive delay")
		}
		return Latency(s.Target, s.Delay), nil
	},
	FaultPartition:             func(s Spec) (Fault, error) { return Partition(s.Target), nil },
	FaultWatchExpired:          func(s Spec) (Fault, error) { return WatchExpired(s.Target), nil },
	FaultWatchExpiredMidStream: func(s Spec) (Fault, error) { return WatchExpiredMidStream(s.Target), nil },
	FaultWatchDrop:             func(s Spec) (Fault, error) { return WatchDrop(s.Target), nil },
	FaultWatchLost:             func(s Spec) (Fault, error) { return WatchLost(s.Target), nil },
	FaultWatchDelay: func(s Spec) (Fault, error) {
		if s.Delay <= 0 {
			return nil, errors.New("watch-delay needs a positive delay")
		}
		return WatchDelay(s.Target, s.Delay), nil
	},
	FaultWatchDuplicate:   func(s Spec) (Fault, error) { return WatchDuplicate(s.Target), nil },
	FaultWatchClose:       func(s Spec) (Fault, error) { return WatchClose(s.Target), nil },
	FaultTombstone:        func(s Spec) (Fault, error) { return Tombstone(s.Target), nil },
	FaultCrash:            func(s Spec) (Fault, error) { return Crash(s.Target), nil },
	FaultTerminate:        func(s Spec) (Fault, error) { return Terminate(s.Target), nil },
	FaultAPIServerRestart: func(s Spec) (Fault, error) { return APIServerRestart(s.Target), nil },
	FaultCompaction:       func(s Spec) (Fault, error) { return Compaction(s.Target), nil },
	FaultTimeTravel: func(s Spec) (Fault, error) {
		return TimeTravel(s.Target, s.Lag, s.Writes, s.Deletions, s.Hold), nil
	},
	FaultStaleRead: func(s Spec) (Fault, error) { return StaleRead(s.Target, s.Lag, s.Writes, s.Deletions), nil },
}

// Verbs are the request verbs a Target can name.
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// Names lists the faults a Spec can name, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Build turns a Spec into an Injection, or says what is wrong with it.
func (s Spec) Build() (Injection, error) {
	build, ok := registry[s.Fault]
	if !ok {
		return Injection{}, fmt.Errorf("unknown fault %q (known: %v)", s.Fault, Names())
	}
	for _, v := range s.Target.Verbs {
		if !slices.Contains(Verbs, v) {
			return Injection{}, fmt.Errorf("%s: unknown verb %q in target", s.Fault, v)
		}
	}
	if s.Fault != FaultTimeTravel && s.Fault != FaultStaleRead && (s.Lag != 0 || s.Writes != 0 || s.Deletions != 0 || s.Hold != 0) {
		return Injection{}, fmt.Errorf("%s: lag, writes, deletions and hold are for %s and %s only", s.Fault, FaultTimeTravel, FaultStaleRead)
	}
	if s.Fault == FaultStaleRead && s.Hold != 0 {
		return Injection{}, fmt.Errorf("%s: a stale read holds nothing: its watches replay from the view at once (%s holds them)", s.Fault, FaultTimeTravel)
	}
	f, err := build(s)
	if err != nil {
		return Injection{}, fmt.Errorf("%s: %w", s.Fault, err)
	}
	in := Injection{Fault: f, When: s.When}
	if _, err := NewInjector(Plan{Injections: []Injection{in}, ControlPlane: noControlPlane{}}); err != nil {
		return Injection{}, err
	}
	return in, nil
}

// whenJSON and specJSON are When and Spec as JSON, both ways: durations as
// "30s", zero fields left out.
type whenJSON struct {
	After       duration.Duration `json:"after,omitzero"`
	Until       duration.Duration `json:"until,omitzero"`
	Nth         int               `json:"nth,omitzero"`
	Count       int               `json:"count,omitzero"`
	Probability float64           `json:"probability,omitzero"`
	Every       duration.Duration `json:"every,omitzero"`
	Restarted   bool              `json:"restarted,omitzero"`
}

type specJSON struct {
	Fault      string            `json:"fault"`
	Target     Target            `json:"target,omitzero"`
	When       When              `json:"when,omitzero"`
	RetryAfter int               `json:"retryAfter,omitzero"`
	Code       int               `json:"code,omitzero"`
	Delay      duration.Duration `json:"delay,omitzero"`
	Lag        duration.Duration `json:"lag,omitzero"`
	Writes     int               `json:"writes,omitzero"`
	Deletions  int               `json:"deletions,omitzero"`
	Hold       duration.Duration `json:"hold,omitzero"`
	Controller string            `json:"controller,omitzero"`
}

// decodeStrict decodes b into v, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// MarshalJSON writes the durations as "30s".
func (w When) MarshalJSON() ([]byte, error) {
	return json.Marshal(whenJSON{duration.Duration(w.After), duration.Duration(w.Until), w.Nth, w.Count, w.Probability, duration.Duration(w.Every), w.Restarted})
}

// UnmarshalJSON accepts "30s" for after, until and every.
func (w *When) UnmarshalJSON(b []byte) error {
	var raw whenJSON
	if err := decodeStrict(b, &raw); err != nil {
		return fmt.Errorf("when: %w", err)
	}
	*w = When{After: time.Duration(raw.After), Until: time.Duration(raw.Until), Nth: raw.Nth, Count: raw.Count, Probability: raw.Probability, Every: time.Duration(raw.Every), Restarted: raw.Restarted}
	return nil
}

// MarshalJSON writes the delay as "2s".
func (s Spec) MarshalJSON() ([]byte, error) {
	return json.Marshal(specJSON{s.Fault, s.Target, s.When, s.RetryAfter, s.Code, duration.Duration(s.Delay),
		duration.Duration(s.Lag), s.Writes, s.Deletions, duration.Duration(s.Hold), s.Controller})
}

// UnmarshalJSON accepts "2s" for delay and rejects unknown fields.
func (s *Spec) UnmarshalJSON(b []byte) error {
	var raw specJSON
	if err := decodeStrict(b, &raw); err != nil {
		return fmt.Errorf("fault spec: %w", err)
	}
	*s = Spec{Fault: raw.Fault, Target: raw.Target, When: raw.When, RetryAfter: raw.RetryAfter, Code: raw.Code, Delay: time.Duration(raw.Delay),
		Lag: time.Duration(raw.Lag), Writes: raw.Writes, Deletions: raw.Deletions, Hold: time.Duration(raw.Hold), Controller: raw.Controller}
	return nil
}

// noControlPlane stands in for the backend's control plane when a Spec is
// checked on its own: whether the backend has one is the run's question.
type noControlPlane struct{}

func (noControlPlane) RestartAPIServer(context.Context) error { return errors.New("no control plane") }
func (noControlPlane) Compact(context.Context) error          { return errors.New("no control plane") }
