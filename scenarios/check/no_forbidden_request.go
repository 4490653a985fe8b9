package check

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
)

// NoForbiddenRequest breaks on the controller's first 401 or 403.
const NoForbiddenRequest = "no-forbidden-request"

func noForbiddenRequest() Check {
	return Check{
		Name: NoForbiddenRequest, Kind: reports.KindForbidden, Invariant: true,
		Catches: "a request of the controller refused with 401 or 403: RBAC it lacks, outside the minute after an API server restart in which the server's own authorizer warms up. Each of the scenario's other controllers runs as its own identity and is judged so too; the finding names it.",
		Reads:   "the requests' answers (History.Requests) and the firings of faults that restart the API server (History.Faults)",
		judge:   judgeForbidden,
	}
}

// restartGrace is how long after an API server restart a 401 or 403 is
// the server's authorizer warming up rather than the controller's RBAC: a
// restarted kube-apiserver refuses requests until its caches of roles and
// bindings have synced.
const restartGrace = time.Minute

// judgeForbidden breaks no-forbidden-request on the controller's first 401
// or 403, saying how many followed.
func judgeForbidden(j *judging) {
	var restarts []time.Time
	for _, f := range j.h.Faults {
		if p, _ := chaos.PlaneOfFault(f.Fault); p.RestartsAPIServer {
			restarts = append(restarts, f.At)
		}
	}
	warming := func(at time.Time) bool {
		return slices.ContainsFunc(restarts, func(t time.Time) bool { return !at.Before(t) && at.Sub(t) < restartGrace })
	}
	var first *reports.Request
	n := 0
	for i, q := range j.h.Requests {
		if (q.Code == http.StatusUnauthorized || q.Code == http.StatusForbidden) && !warming(q.At) {
			if first == nil {
				first = &j.h.Requests[i]
			}
			n++
		}
	}
	if first == nil {
		return
	}
	ns := ""
	if first.Namespace != "" {
		ns = " in " + first.Namespace
	}
	by := "the controller's"
	if first.Controller != "" {
		by = "the controller " + first.Controller + "'s"
	}
	detail := fmt.Sprintf("%s %s %s%s was refused with %d", by, first.Verb, first.Resource, ns, first.Code)
	if first.Name != "" {
		detail = fmt.Sprintf("%s %s %s/%s%s was refused with %d", by, first.Verb, first.Resource, first.Name, ns, first.Code)
	}
	if n > 1 {
		detail += fmt.Sprintf(", and %d more requests after it", n-1)
	}
	if first.Error != "" {
		detail += ": " + text.FirstLine(first.Error)
	}
	j.find(Finding(NoForbiddenRequest, first.At, RequestSubject(*first), first, detail))
}
