package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-lab/converge/internal/text"
)

// Supervised is a ControlPlane that watches the processes it runs (found
// on Env.ControlPlane by type assertion): a component that exits when
// nothing asked it to is an Outage, and is started again with the same
// flags. A run during which one was down gets no verdict: the world it
// judged was not running as a cluster's does.
type Supervised interface {
	// Outages are the plane's outages so far, oldest first, and a channel
	// closed at the next one.
	Outages() (outages []Outage, next <-chan struct{})
	// Err is why the plane cannot serve runs (a component that could not
	// be started again), or nil.
	Err() error
}

// Logged is a ControlPlane whose components write logs the harness can
// quote (found on Env.ControlPlane by type assertion).
type Logged interface {
	// Logs are the paths of the components' logs, by component.
	Logs() map[string]string
}

// Outage is a control-plane component's exit that nothing asked for.
type Outage struct {
	// Component is the process's name ("kube-controller-manager").
	Component string
	// At is when its exit was seen.
	At time.Time
	// Exit is how it ended ("signal: killed", "exit status 1").
	Exit string
	// Log is the path of its whole log; Tail is the log's last lines when
	// it exited.
	Log, Tail string
	// Restarted is when it served again after a restart with the same
	// flags; zero while it is down or when it could not be restarted.
	Restarted time.Time
}

// String says what happened, in one line, without the log's tail.
func (o Outage) String() string {
	s := fmt.Sprintf("%s exited (%s) at %s", o.Component, o.Exit, o.At.Format("15:04:05.000"))
	if !o.Restarted.IsZero() {
		s += fmt.Sprintf(" and served again %v later, restarted with the same flags", o.Restarted.Sub(o.At).Round(time.Millisecond))
	}
	return s
}

// Detail is String with the log's tail and the path of the whole log.
func (o Outage) Detail() string {
	var b strings.Builder
	b.WriteString(o.String())
	if o.Tail != "" {
		fmt.Fprintf(&b, "; the last lines of its log:\n%s", text.Indent(o.Tail, "    "))
	}
	if o.Log != "" {
		fmt.Fprintf(&b, "\n(its whole log: %s)", o.Log)
	}
	return b.String()
}
