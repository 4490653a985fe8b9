package chaos_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
)

func TestParseRequest(t *testing.T) {
	for _, tt := range []struct {
		method, url string
		want        chaos.Request
		ok          bool
	}{
		{"GET", "/apis/apps/v1/namespaces/web/deployments/api", chaos.Request{Verb: "get", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "web", Name: "api"}, true},
		{"GET", "/apis/apps/v1/deployments?labelSelector=a%3Db", chaos.Request{Verb: "list", Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"GET", "/api/v1/namespaces/web/pods?watch=true&resourceVersion=5", chaos.Request{Verb: "watch", Version: "v1", Resource: "pods", Namespace: "web"}, true},
		{"GET", "/api/v1/pods?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true", chaos.Request{Verb: "watch", Version: "v1", Resource: "pods", InitialEvents: true}, true},
		{"PATCH", "/apis/apps/v1/namespaces/web/deployments/api", chaos.Request{Verb: "patch", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "web", Name: "api"}, true},
		{"PUT", "/apis/apps/v1/namespaces/web/deployments/api/status", chaos.Request{Verb: "update", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "status", Namespace: "web", Name: "api"}, true},
		{"POST", "/api/v1/namespaces/web/pods/p/binding", chaos.Request{Verb: "create", Version: "v1", Resource: "pods", Subresource: "binding", Namespace: "web", Name: "p"}, true},
		{"DELETE", "/api/v1/namespaces/web/pods", chaos.Request{Verb: "deletecollection", Version: "v1", Resource: "pods", Namespace: "web"}, true},
		{"GET", "/api/v1/namespaces/web", chaos.Request{Verb: "get", Version: "v1", Resource: "namespaces", Name: "web"}, true},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", chaos.Request{Verb: "update", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespace: "kube-system", Name: "x"}, true},
		{"GET", "/version", chaos.Request{}, false},
		{"GET", "/apis", chaos.Request{}, false},
		{"GET", "/api/v1", chaos.Request{}, false},
	} {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			got, ok := chaos.ParseRequest(httptest.NewRequest(tt.method, tt.url, http.NoBody))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A create carries its name in the body, not the URL: it is read from
// there, and the body is left for the server.
func TestParseRequestReadsTheNameOfACreate(t *testing.T) {
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"web"}}`
	for name, req := range map[string]*http.Request{
		"client request":  mustRequest(t, strings.NewReader(body)), // GetBody set
		"server request":  httptest.NewRequest("POST", "/api/v1/namespaces/web/pods", io.NopCloser(strings.NewReader(body))),
		"generateName":    mustRequest(t, strings.NewReader(`{"metadata":{"generateName":"web-"}}`)),
		"not JSON at all": mustRequest(t, strings.NewReader("\x0a\x02k8s")),
	} {
		t.Run(name, func(t *testing.T) {
			r, ok := chaos.ParseRequest(req)
			require.True(t, ok)
			assert.Equal(t, "create", r.Verb)
			if name == "client request" || name == "server request" {
				assert.Equal(t, "web-1", r.Name)
				rest, err := io.ReadAll(req.Body)
				require.NoError(t, err)
				assert.Equal(t, body, string(rest), "the body is still there for the server")
			} else {
				assert.Empty(t, r.Name)
			}
		})
	}
}

func mustRequest(t *testing.T, body io.Reader) *http.Request {
	req, err := http.NewRequest("POST", "https://k8s/api/v1/namespaces/web/pods", body)
	require.NoError(t, err)
	return req
}

func TestTargetMatches(t *testing.T) {
	r := chaos.Request{Verb: "patch", Version: "v1", Resource: "deployments", Namespace: "web", Name: "api"}
	assert.True(t, chaos.Target{}.Matches(r))
	assert.True(t, chaos.Target{Verbs: []string{"update", "patch"}, Resource: "deployments", Name: "api"}.Matches(r))
	assert.False(t, chaos.Target{Verbs: []string{"update"}}.Matches(r))
	assert.False(t, chaos.Target{Resource: "pods"}.Matches(r))
	assert.False(t, chaos.Target{Namespace: "other"}.Matches(r))
	assert.False(t, chaos.Target{Name: "db"}.Matches(r))
}
