// Package reports is the record of a scenario run: the Result (the verdict,
// its reasons, counters, the seed and the command that replays it) and the
// History it was judged on, written as versioned JSON, plus JUnit XML for
// CI systems.
//
// A Result is written even when the run panicked or timed out, so it can be
// reloaded to be judged again or rendered offline. What it cannot hold: the
// controller's own logs (they go to the run's logger), and, for a binary run
// out of process, its queue and reconciles (nothing exposes them to the
// harness).
package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/duration"
	"github.com/converge-lab/converge/internal/userfile"
)

// SchemaVersion is the version of the Result JSON. Read also reads v2
// and v1 results and upgrades them; it refuses any other version.
//
// v3 holds the verdict as data: Findings, each with its check, kind,
// object, instant and the request it follows; Reasons are their
// sentences.
const SchemaVersion = "converge.dev/result/v3"

// SchemaV2 keyed objects by kind and name (writes per object as
// resource/name) and added History.Series; its verdict was its reasons
// and violations.
const SchemaV2 = "converge.dev/result/v2"

// SchemaV1 is the scaler-only schema before v2: writes were keyed by
// Deployment name, and there were no series.
const SchemaV1 = "converge.dev/result/v1"

// Result is one run of one scenario on one backend with one seed.
type Result struct {
	Schema   string `json:"schema"`
	Scenario string `json:"scenario"`
	// Description and Catches come from the scenario, for readers of the
	// result alone.
	Description string `json:"description,omitempty"`
	Catches     string `json:"catches,omitempty"`
	// Plan is the scenario's fault schedule, Settle how long the goal had
	// to hold and Deadline by when: a report draws them.
	Plan       []chaos.Spec `json:"plan,omitempty"`
	Settle     Duration     `json:"settle,omitempty"`
	Deadline   Duration     `json:"deadline,omitempty"`
	Backend    string       `json:"backend"`
	Seed       uint64       `json:"seed"`
	Controller string       `json:"controller"`

	Pass bool `json:"pass"`
	// Reasons say why the run failed, one per broken invariant, missed goal
	// or exceeded budget; empty when it passed.
	Reasons []string `json:"reasons,omitempty"`
	// Findings are what the run was found to do wrong, as data: Reasons
	// are their sentences. A fault that never fired is one that does not
	// fail the run.
	Findings   []Finding   `json:"findings,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// Invariants the run checked; those with no violation held.
	Invariants []string `json:"invariants,omitempty"`
	// Converged: the goal held for the whole settle window before the
	// deadline; TimeToConverge is from the start of the run to the first
	// instant from which it held.
	Converged      bool     `json:"converged"`
	TimeToConverge Duration `json:"timeToConverge,omitempty"`
	// Unfired names the scenario's faults that never fired, and its
	// invariants and write rules that could not fail in this run (they
	// selected nothing, or read only missing fields): the run proves
	// nothing about them. It does not fail the run; it fails the test.
	Unfired []string `json:"unfired,omitempty"`
	// Inapplicable names the fault profile's faults (Spec.Profile) that
	// matched no request of the controller: the profile does not apply to
	// it, and a test whose profile's faults are all here is skipped.
	Inapplicable []string `json:"inapplicable,omitempty"`
	// Notes are what the harness noticed that may explain a failure
	// without being part of the verdict, such as a slow control plane.
	Notes []string `json:"notes,omitempty"`

	// Started is the run's start on its own clock (virtual on the fake
	// backend); Simulated is how long the run lasted on that clock, Wall
	// how long it took.
	Started   time.Time `json:"started"`
	Simulated Duration  `json:"simulated"`
	Wall      Duration  `json:"wall"`

	Counters Counters `json:"counters"`
	History  History  `json:"history"`

	// Replay is the command that runs this again with the same seed.
	Replay string `json:"replay"`
	// Spec is the scenario as it ran, as JSON a scenario file can hold, so
	// the result replays with no catalogue or file at hand.
	Spec json.RawMessage `json:"spec,omitempty"`
	// RunID names the invocation that asked for this run, so results of
	// one invocation are told from older ones in the same folder.
	RunID string `json:"runID,omitempty"`
	// Versions of what ran.
	Versions map[string]string `json:"versions,omitempty"`
	// Error is set when the run could not be carried out (not a verdict on
	// the controller): a bad scenario, a backend that did not start, a
	// panic in the harness.
	Error string `json:"error,omitempty"`
	// Unavailable says the run could not be carried out because its
	// backend cannot run here and nothing requires it (its binaries are
	// missing, no cluster was given): Error says why. A test skips such a
	// run.
	Unavailable bool `json:"unavailable,omitempty"`
	// PlaneLogs are the paths of the control plane's component logs, by
	// component, on a failed run on a plane that keeps them (envtest), so
	// that a test can quote and keep them.
	PlaneLogs map[string]string `json:"planeLogs,omitempty"`
}

// Violation is the first breach of one invariant.
type Violation struct {
	Invariant string    `json:"invariant"`
	At        time.Time `json:"at"`
	Object    string    `json:"object,omitempty"`
	Request   string    `json:"request,omitempty"`
	Detail    string    `json:"detail"`
}

// Counters are the run's totals.
type Counters struct {
	// Requests by the controller under test, by verb, as it saw them
	// (injected answers included).
	RequestsByVerb map[string]int `json:"requestsByVerb"`
	// RequestsByCode by HTTP status code ("200", "409", ...; "error" for a
	// refused connection).
	RequestsByCode map[string]int `json:"requestsByCode"`
	// Writes are the controller's successful writes per object
	// (resource/name), Needed the writes its final state needed where the
	// controller's judge can tell (the scaler: one per replica change).
	Writes map[string]int `json:"writes"`
	Needed map[string]int `json:"needed"`
	// Reconciles and Retries of every instance together; -1 when the
	// controller does not expose them.
	Reconciles int64 `json:"reconciles"`
	Retries    int64 `json:"retries"`
	Faults     int   `json:"faults"`
	Instances  int   `json:"instances"`
	// PodLag is the longest a managed Deployment waited for the pods it
	// asked for: from a rise of its replicas to that many pods existing.
	// On a real control plane it is kube-controller-manager's delay, which
	// a scenario's timings must leave room for.
	PodLag Duration `json:"podLag,omitempty"`
	// GoalEvaluations is how often the harness judged the goal: at most
	// once a poll, and only when something happened or a time fell due.
	GoalEvaluations int `json:"goalEvaluations,omitempty"`
}

// History is everything the verdict was made on, in time order per kind.
//
// It holds every fact a verdict is judged on (see scenarios.Judge): the
// objects the observer saw with each event, the body of each successful
// write, the instances' lives, the instants the goal was judged at and
// what the instances said then, and what the run found as it happened (a
// panic, a leak, a hot loop, the controller's own judge).
type History struct {
	// Start is the run's start on its own clock: deadlines and the
	// faults' windows count from it.
	Start    time.Time      `json:"start,omitzero"`
	Requests []Request      `json:"requests"`
	Events   []WatchEvent   `json:"events"`
	Faults   []chaos.Firing `json:"faults"`
	States   []State        `json:"states"`
	Samples  []Sample       `json:"samples"`
	// Series are the fields the scenario's goal and invariants name, per
	// object, on change: what the report charts for any controller.
	Series []Series `json:"series,omitempty"`
	// Log is what the harness did: instances started and stopped,
	// convergence reached or lost.
	Log []Entry `json:"log"`
	// End is every object of the kinds the scenario watches as the
	// observer last saw it, sorted by kind and name; kept only when the
	// run was asked for it (an exploration compares it with a reference).
	End []EndObject `json:"end,omitempty"`
	// Resources are the kinds the observer watched, by resource, as
	// "apps/v1 Deployment".
	Resources map[string]string `json:"resources,omitempty"`
	// Lives are the instances of the controller, and of any other the
	// scenario runs beside it, from start to end.
	Lives []Life `json:"lives,omitempty"`
	// Polls are the instants the goal was judged at, with what the
	// instances and the controller's own judge said then.
	Polls []Poll `json:"polls,omitempty"`
	// Recorded are what the run found as it happened, rather than in the
	// history afterwards: a panic, an instance that did not stop, a hot
	// loop, and the findings of the controller's own judge.
	Recorded []Finding `json:"recorded,omitempty"`
	// Received are the objects each instance received from the API
	// server, each version of an object (its UID and resourceVersion) once
	// per instance and way, and each deletion it was told of: what it had
	// seen when it acted, for the checks that judge an action against it
	// (Request.Received).
	Received []Receipt `json:"received,omitempty"`
	// Gaps are the observer's watches that broke and listed again (after
	// an API server's restart, say): what changed of the resource between
	// its last event before and its first after may not be in Events.
	Gaps []Gap `json:"gaps,omitempty"`
}

// Gap is an observer's watch of Resource that ended with an error at At,
// to be listed again: events of the resource from then until its next one
// may have been missed.
type Gap struct {
	At       time.Time `json:"at"`
	Resource string    `json:"resource"`
	Error    string    `json:"error,omitempty"`
}

// Receipt is one version of an object an instance received for the first
// time (in a list, a get, a watch event or the answer to its own write),
// or the deletion of one (a DELETED watch event).
type Receipt struct {
	At         time.Time `json:"at"`
	Instance   int       `json:"instance"`
	Controller string    `json:"controller,omitempty"`
	Resource   string    `json:"resource"` // "configmaps", without its group
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        string    `json:"uid"`
	// RV is the version's resourceVersion (a deletion's: the DELETED
	// event's); empty when the answer did not say.
	RV string `json:"rv,omitempty"`
	// Answer: it came in the answer to the instance's own write, not in
	// a list, a get or a watch event, so its caches may not hold it.
	Answer  bool `json:"answer,omitempty"`
	Deleted bool `json:"deleted,omitempty"`
}

// Life is one instance of the controller.
type Life struct {
	Instance int `json:"instance"`
	// Controller names the controller the instance is one of, when a
	// scenario runs several; empty for the controller under test.
	Controller string    `json:"controller,omitempty"`
	Started    time.Time `json:"started"`
	// Ended is when a fault ended it (zero when it ran to the run's end);
	// Requests is how many requests the history held then.
	Ended    time.Time `json:"ended,omitzero"`
	Requests int       `json:"requests,omitempty"`
}

// Poll is one instant the goal was judged at.
type Poll struct {
	At time.Time `json:"at"`
	// Events and Requests are how many of each the history held then: the
	// world as the observer had seen it, and the controller's writes.
	Events   int `json:"events"`
	Requests int `json:"requests"`
	// Replacing: an instance was being replaced. Live counts the
	// instances running and leading (or with no probe to say); Work is
	// the first with work queued or in progress, as a sentence.
	Replacing bool   `json:"replacing,omitempty"`
	Live      int    `json:"live"`
	Work      string `json:"work,omitempty"`
	// Judge is why the controller's own judge said its goal did not hold
	// ("" when it held or there is no such judge).
	Judge string `json:"judge,omitempty"`
}

// EndObject is one object at the end of a run.
type EndObject struct {
	// Kind is "apiVersion Kind", as in "apps/v1 Deployment".
	Kind   string         `json:"kind"`
	Name   string         `json:"name"`
	Object map[string]any `json:"object"`
}

// Request is one request of the controller under test, or of another
// controller the scenario runs beside it.
type Request struct {
	At       time.Time `json:"at"`
	Instance int       `json:"instance"`
	// Controller names the controller that made it, when a scenario runs
	// several; empty for the controller under test.
	Controller string `json:"controller,omitempty"`
	Verb       string `json:"verb"`
	Resource   string `json:"resource"`
	// Namespace is empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Code is the HTTP status the controller got; 0 for a refused
	// connection or a cancelled request.
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
	// Seen is how many of History.Events the observer had recorded when
	// the request was sent: the world as the harness knew it then.
	Seen int `json:"seen,omitempty"`
	// Received is how many of History.Received had been recorded when
	// the request was sent: what the instances had received by then.
	Received int `json:"received,omitempty"`
	// UID is the UID of the object the answer to a successful write
	// carried (for a delete, the object it removed), when it said.
	UID string `json:"uid,omitempty"`
	// Body is what a successful write sent, for the write rules; nil for
	// reads, failed writes and a body that could not be read.
	Body *Body `json:"body,omitempty"`
}

// Body is what one write sent.
type Body struct {
	Group       string `json:"group,omitempty"`
	Version     string `json:"version,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// PatchType and Patch for a patch; Object for a create or an update.
	PatchType string          `json:"patchType,omitempty"`
	Patch     json.RawMessage `json:"patch,omitempty"`
	Object    map[string]any  `json:"object,omitempty"`
}

// String is "patch deployments/web-1 -> 409", after "labeler: " for a
// request of another controller than the one under test.
func (r Request) String() string {
	obj := r.Resource
	if r.Name != "" {
		obj += "/" + r.Name
	}
	by := ""
	if r.Controller != "" {
		by = r.Controller + ": "
	}
	return fmt.Sprintf("%s%s %s -> %d", by, r.Verb, obj, r.Code)
}

// WatchEvent is a change the observer (an unfaulted client) saw.
type WatchEvent struct {
	At       time.Time `json:"at"`
	Type     string    `json:"type"` // ADDED, MODIFIED, DELETED
	Resource string    `json:"resource"`
	Name     string    `json:"name"`
	RV       string    `json:"rv"`
	// Kind ("apps/v1 Deployment"), Namespace and Object are the object as
	// the observer saw it (without managedFields); empty for an event a
	// controller's own judge reported for the timeline.
	Kind      string         `json:"kind,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	Object    map[string]any `json:"object,omitempty"`
	// Tombstone: the deletion was learnt from a relist, not seen; RV is
	// the object's last known version, not the deletion's.
	Tombstone bool `json:"tombstone,omitempty"`
}

// State is a managed Deployment as the observer saw it, sampled on change.
type State struct {
	At         time.Time `json:"at"`
	Deployment string    `json:"deployment"`
	Desired    int32     `json:"desired"`
	Ready      int32     `json:"ready"`
	Pods       int32     `json:"pods"`
	Max        int32     `json:"max"`
}

// PodLag is the longest wait in states (in time order) between a rise of
// a Deployment's desired replicas and that many of its pods existing. A
// rise still waited for at the end counts up to the last state.
func PodLag(states []State) time.Duration {
	type rise struct {
		at      time.Time
		desired int32
	}
	var longest time.Duration
	last := map[string]int32{}
	waiting := map[string]rise{}
	for _, s := range states {
		prev, seen := last[s.Deployment]
		last[s.Deployment] = s.Desired
		w, ok := waiting[s.Deployment]
		switch {
		case !seen || s.Desired > prev:
			// A rise before the last one is met extends the same wait.
			if !ok {
				w.at = s.At
			}
			w.desired, ok = s.Desired, true
		case ok && s.Desired < w.desired:
			w.desired = s.Desired
		}
		if !ok {
			continue
		}
		if s.Pods >= w.desired {
			longest = max(longest, s.At.Sub(w.at))
			delete(waiting, s.Deployment)
			continue
		}
		waiting[s.Deployment] = w
	}
	if len(states) > 0 {
		end := states[len(states)-1].At
		for _, w := range waiting {
			longest = max(longest, end.Sub(w.at))
		}
	}
	return longest
}

// Sample is the controller's inside, sampled on change.
type Sample struct {
	At         time.Time `json:"at"`
	QueueDepth int       `json:"queueDepth"`
	Reconciles int64     `json:"reconciles"`
	Retries    int64     `json:"retries"`
	// CountsRetries: every instance's probe counts its retries.
	CountsRetries bool `json:"countsRetries,omitempty"`
}

// Series is one field of one object over time, as the observer saw it:
// a point whenever its value changed. Booleans are 0 and 1, and a
// condition (status.conditions[Ready]) is 1 while its status is "True".
type Series struct {
	// Kind is "apiVersion Kind", as in "apps/v1 Deployment".
	Kind   string  `json:"kind"`
	Name   string  `json:"name"`
	Field  string  `json:"field"`
	Points []Point `json:"points"`
}

// Point is one value of a Series.
type Point struct {
	At    time.Time `json:"at"`
	Value float64   `json:"value"`
}

// Object is "Kind/name", how reports name the object of a series.
func (s Series) Object() string {
	kind := s.Kind
	if i := strings.LastIndexByte(kind, ' '); i >= 0 {
		kind = kind[i+1:]
	}
	return kind + "/" + s.Name
}

// Entry is one thing the harness did.
type Entry struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// Duration is a time.Duration written as "1m30s", as every duration in
// converge's files is.
type Duration = duration.Duration

// FileName is where a result goes in a report folder:
// scenario_backend_seed.json, with the controller's name after the seed
// when it is not the scaler, so runs of several controllers share a folder.
func (r *Result) FileName() string {
	if r.Controller != "" && r.Controller != "scaler" {
		return fmt.Sprintf("%s_%s_%d_%s.json", r.Scenario, r.Backend, r.Seed, r.Controller)
	}
	return fmt.Sprintf("%s_%s_%d.json", r.Scenario, r.Backend, r.Seed)
}

// Write writes r into dir as FileName, atomically, and returns the path.
func Write(dir string, r *Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("reports: encoding %s: %w", r.FileName(), err)
	}
	path := filepath.Join(dir, r.FileName())
	tmp, err := os.CreateTemp(dir, ".result-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// Read reads a result file.
func Read(path string) (*Result, error) {
	// Only a regular file: a pipe named as a result would wait for ever.
	data, err := userfile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	// One decoding for the schemas of now; a v1 result, whose durations
	// may be numbers, is decoded again once they are rewritten.
	var r Result
	err = json.Unmarshal(data, &r)
	if err != nil || r.Schema == SchemaV1 {
		var head struct {
			Schema string `json:"schema"`
		}
		if json.Unmarshal(data, &head) == nil && head.Schema == SchemaV1 {
			if data, err = v1Durations(data); err != nil {
				return nil, fmt.Errorf("reports: %s: %w", path, err)
			}
			r = Result{}
			err = json.Unmarshal(data, &r)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}
	switch r.Schema {
	case SchemaVersion:
	case SchemaV2:
		upgradeV2(&r)
	case SchemaV1:
		upgradeV1(&r)
		upgradeV2(&r)
	default:
		return nil, fmt.Errorf("reports: %s: schema %q, this converge reads %q (and upgrades %q and %q): a newer converge wrote it, or it is no result",
			path, r.Schema, SchemaVersion, SchemaV2, SchemaV1)
	}
	return &r, nil
}

// ReadSummary reads the result at path without its history, which is
// most of it: what an index of runs shows (WriteIndex) of a run whose page
// is written already. A result of an older schema is read whole (Read),
// its history then dropped.
func ReadSummary(path string) (*Result, error) {
	data, err := userfile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	var s struct {
		Result
		History skipped `json:"history"` // shadows the Result's: not decoded
	}
	if err := json.Unmarshal(data, &s); err != nil || s.Schema != SchemaVersion {
		r, err := Read(path)
		if err != nil {
			return nil, err
		}
		r.History = History{}
		return r, nil
	}
	return &s.Result, nil
}

// WriteSummaries writes into the file path the summaries of results,
// each without its history (what ReadSummary reads of a result file):
// what a process that ran them and wrote their pages (WritePage) tells
// the report that lists them, which then reads none of their files.
func WriteSummaries(path string, results []*Result) error {
	out := make([]Result, 0, len(results))
	for _, r := range results {
		s := *r
		s.History = History{}
		out = append(out, s)
	}
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("reports: encoding the summaries: %w", err)
	}
	return writeFile(path, data)
}

// ReadSummaries reads a file WriteSummaries wrote. A summary of another
// schema than this converge's is an error: the report reads that run's
// file instead.
func ReadSummaries(path string) ([]*Result, error) {
	data, err := userfile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	var out []*Result
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}
	for _, r := range out {
		if r == nil || r.Schema != SchemaVersion {
			return nil, fmt.Errorf("reports: %s: a summary that is not of schema %q", path, SchemaVersion)
		}
	}
	return out, nil
}

// skipped is a JSON value left undecoded.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// upgradeV2 reads a v2 result as v3: its findings are made from what it
// held as data, its violations, whether it converged and its error. Its
// budgets were only words, and stay in its reasons, which are kept as
// they were written.
func upgradeV2(r *Result) {
	for _, v := range r.Violations {
		kind := KindInvariant
		switch v.Invariant { // the built-in invariants of v2 with kinds of their own
		case "writes-allowed":
			kind = KindWriteRule
		case "no-forbidden-request":
			kind = KindForbidden
		case "clean-shutdown":
			kind = KindLeak
		case "no-panic":
			kind = KindPanic
		}
		r.Findings = append(r.Findings, Finding{Check: v.Invariant, Kind: kind, At: v.At, Subject: Subject{Name: v.Object},
			RequestText: v.Request, Detail: v.Detail})
	}
	switch {
	case r.Error != "":
		r.Findings = append(r.Findings, Finding{Check: CheckHarness, Kind: KindHarness, Detail: r.Error})
	case !r.Converged:
		r.Findings = append(r.Findings, Finding{Check: CheckGoal, Kind: KindGoal, Within: r.Deadline})
	}
	r.Schema = SchemaVersion
}

// v1Durations rewrites the durations of a v1 result's fault plan, which
// v1 could write as numbers of nanoseconds, as strings ("30s").
func v1Durations(data []byte) ([]byte, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if raw["plan"] == nil {
		return data, nil
	}
	var plan []map[string]any
	if err := json.Unmarshal(raw["plan"], &plan); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	str := func(m map[string]any, key string) {
		if n, ok := m[key].(float64); ok {
			m[key] = time.Duration(n).String()
		}
	}
	for _, spec := range plan {
		str(spec, "delay")
		if when, ok := spec["when"].(map[string]any); ok {
			for _, k := range []string{"after", "until", "every"} {
				str(when, k)
			}
		}
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	raw["plan"] = b
	return json.Marshal(raw)
}

// upgradeV1 reads a v1 result as v2: its writes were keyed by the
// Deployment's name alone.
func upgradeV1(r *Result) {
	rekey := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, v := range m {
			if !strings.Contains(k, "/") {
				k = "deployments/" + k
			}
			out[k] += v
		}
		return out
	}
	r.Counters.Writes, r.Counters.Needed = rekey(r.Counters.Writes), rekey(r.Counters.Needed)
	r.Schema = SchemaV2
}

// ReadDir reads every result file (*.json) in dir, sorted by file name. dir
// is a folder's name, never a pattern. A file that is not a result is named
// in the error and skipped.
func ReadDir(dir string) ([]*Result, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*Result
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := Read(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// Skipped says why r did not run what it names, or "": it passed, and
// every fault of the profile it ran under matched no request of the
// controller (Inapplicable), so the profile does not apply to it.
func (r *Result) Skipped() string {
	if !r.Pass || r.Error != "" || len(r.Unfired) > 0 || len(r.Inapplicable) == 0 {
		return ""
	}
	profile, n := "", 0
	for _, f := range r.Plan {
		if f.Profile != "" {
			profile = f.Profile
			n++
		}
	}
	if n != len(r.Inapplicable) {
		return ""
	}
	return fmt.Sprintf("the %s profile does not apply: none of its faults matched a request of the controller (%s)", profile, strings.Join(r.Inapplicable, ", "))
}
