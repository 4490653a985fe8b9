package chaos

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// Crash kills the controller instance whose client it is installed in,
// right after the matching request succeeds ("crash right after the scaler's
// first PATCH of web-1"): from that instant every request of that client
// fails as a dead process's would (connection refused), open watch streams
// break, and Plan.OnCrash is called so the harness can stop the instance
// without a graceful drain and start a new one. Install one injector per
// instance.
func Crash(t Target) Fault { return crash{t: t} }

type crash struct {
	everywhere
	t Target
}

func (f crash) Name() string   { return FaultCrash }
func (f crash) Target() Target { return f.t }
func (crash) endsInstance()    {}

// Terminate asks the controller instance whose client it is installed in to
// shut down gracefully, right after the matching request succeeds: the same
// path as SIGTERM (for an in-process controller, the end of its Run
// context), through Plan.OnTerminate. Unlike Crash, its client keeps
// working, so in-flight writes finish and the Lease is released.
func Terminate(t Target) Fault { return terminate{t: t} }

type terminate struct {
	everywhere
	t Target
}

func (f terminate) Name() string   { return FaultTerminate }
func (f terminate) Target() Target { return f.t }
func (terminate) endsInstance()    {}

// fence is what a crash leaves behind: a client that can no longer reach
// anything.
type fence struct{ down atomic.Bool }

// Crashed reports whether a Crash of the plan has fired: the instance is
// dead and its client fenced.
func (inj *Injector) Crashed() bool { return inj.fence.down.Load() }

// after runs after request r succeeded (a write that failed changed
// nothing, so "right after the first PATCH of web-1" means the first that
// took effect): a triggered control-plane fault
// that fires is applied, a Terminate that fires calls OnTerminate, and a
// Crash that fires fences the injector and calls OnCrash.
func (inj *Injector) after(r Request) {
	for i, in := range inj.plan.Injections {
		if !in.Fault.Target().Matches(r) || inj.Crashed() {
			continue
		}
		switch in.Fault.(type) {
		case controlPlaneFault:
			if in.Fault.Target().IsZero() {
				continue
			}
			if n := inj.fires(i, r.String()); n > 0 {
				inj.fireControlPlane(i, inj.clock.Now(), r.String(), n)
			}
		case terminate:
			if n := inj.fires(i, r.String()); n > 0 {
				inj.record(i, inj.clock.Now(), r.String(), n, "instance asked to terminate")
				if inj.plan.OnTerminate != nil {
					go inj.plan.OnTerminate()
				}
			}
		case crash:
			n := inj.fires(i, r.String())
			if n == 0 {
				continue
			}
			inj.fence.down.Store(true)
			inj.record(i, inj.clock.Now(), r.String(), n, "instance crashed; its client is fenced")
			if inj.plan.OnCrash != nil {
				go inj.plan.OnCrash()
			}
			return
		}
	}
}

var errFenced = errors.New("converge: the instance crashed")

// fencedBody breaks a response body once the injector is fenced.
type fencedBody struct {
	io.ReadCloser
	inj *Injector
}

func (b fencedBody) Read(p []byte) (int, error) {
	if b.inj.Crashed() {
		return 0, errFenced
	}
	return b.ReadCloser.Read(p)
}

func (inj *Injector) refused(req *http.Request) error {
	return refused(req.URL.Host)
}
