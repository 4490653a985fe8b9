package chaos

import (
	"net/http"
	"strings"
)

// Request is what a fault's target is matched against: a Kubernetes API
// request as the API server would classify it.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, delete, deletecollection
	Group       string // "" for the core group
	Resource    string // plural, lower case: "deployments"
	Subresource string // "status", "binding", ...
	Namespace   string
	Name        string
	// InitialEvents: a watch that streams the current state first
	// (sendInitialEvents=true), which is how informers list against API
	// servers that support it.
	InitialEvents bool
}

// Watch reports whether the request is a watch.
func (r Request) Watch() bool { return r.Verb == "watch" }

// Lists reports whether the request reads a whole collection's state: a
// LIST, or a watch with initial events. An informer's relist is one.
func (r Request) Lists() bool { return r.Verb == "list" || r.InitialEvents }

// String is "verb resource[/subresource] namespace/name".
func (r Request) String() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	obj := r.Name
	if r.Namespace != "" {
		obj = r.Namespace + "/" + r.Name
	}
	return strings.TrimSpace(r.Verb + " " + res + " " + obj)
}

// ParseRequest classifies an HTTP request to the Kubernetes API. ok is false
// for anything that is not a resource request (discovery, /version, /healthz).
func ParseRequest(req *http.Request) (r Request, ok bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 4 && parts[0] == "apis":
		r.Group = parts[1]
		parts = parts[3:] // apis/group/version
	default:
		return Request{}, false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		r.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return Request{}, false
	}
	r.Resource = parts[0]
	if len(parts) > 1 {
		r.Name = parts[1]
	}
	if len(parts) > 2 {
		r.Subresource = parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case r.Name != "":
			r.Verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			r.Verb = "watch"
			r.InitialEvents = req.URL.Query().Get("sendInitialEvents") == "true"
		default:
			r.Verb = "list"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
		if r.Name == "" {
			r.Verb = "deletecollection"
		}
	default:
		return Request{}, false
	}
	return r, true
}

// Target selects requests. Empty fields match anything.
type Target struct {
	Verbs     []string `json:"verbs,omitempty"`
	Resource  string   `json:"resource,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
}

// Matches reports whether r is targeted.
func (t Target) Matches(r Request) bool {
	if len(t.Verbs) > 0 && !contains(t.Verbs, r.Verb) {
		return false
	}
	return (t.Resource == "" || t.Resource == r.Resource) &&
		(t.Namespace == "" || t.Namespace == r.Namespace) &&
		(t.Name == "" || t.Name == r.Name)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
