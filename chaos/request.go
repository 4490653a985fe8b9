package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Request is what a fault's target is matched against: a Kubernetes API
// request as the API server would classify it.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, delete, deletecollection
	Group       string // "" for the core group
	Version     string
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
		r.Version = parts[1]
		parts = parts[2:] // api/v1
	case len(parts) >= 4 && parts[0] == "apis":
		r.Group, r.Version = parts[1], parts[2]
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
		if r.Name == "" && r.Subresource == "" {
			r.Name = createdName(req)
		}
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

// IsZero reports whether t names nothing, so matches every request.
func (t Target) IsZero() bool {
	return len(t.Verbs) == 0 && t.Resource == "" && t.Namespace == "" && t.Name == ""
}

// Equal reports whether t and u name the same requests.
func (t Target) Equal(u Target) bool {
	return slices.Equal(t.Verbs, u.Verbs) && t.Resource == u.Resource && t.Namespace == u.Namespace && t.Name == u.Name
}

// Matches reports whether r is targeted.
func (t Target) Matches(r Request) bool {
	if len(t.Verbs) > 0 && !slices.Contains(t.Verbs, r.Verb) {
		return false
	}
	return (t.Resource == "" || t.Resource == r.Resource) &&
		(t.Namespace == "" || t.Namespace == r.Namespace) &&
		(t.Name == "" || t.Name == r.Name)
}

// createdName reads the name of the object a create sends, which the URL
// does not carry, so that "the first create of web-1" can be targeted. The
// body is read from GetBody where the client can send it again, else read
// and put back. An object with generateName, or a body that is not JSON,
// has no name here.
func createdName(req *http.Request) string {
	var body io.ReadCloser
	switch {
	case req.GetBody != nil:
		b, err := req.GetBody()
		if err != nil {
			return ""
		}
		body = b
	case req.Body != nil && req.Body != http.NoBody:
		raw, err := io.ReadAll(io.LimitReader(req.Body, maxObjectBytes+1))
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(raw))
		if err != nil || len(raw) > maxObjectBytes {
			return ""
		}
		body = io.NopCloser(bytes.NewReader(raw))
	default:
		return ""
	}
	defer body.Close()
	var o object
	if err := json.NewDecoder(io.LimitReader(body, maxObjectBytes)).Decode(&o); err != nil {
		return ""
	}
	return o.Metadata.Name
}

// maxObjectBytes is the API server's own limit on a request body.
const maxObjectBytes = 3 << 20
