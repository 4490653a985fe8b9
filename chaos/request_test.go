package chaos_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-lab/converge/chaos"
)

func TestParseRequest(t *testing.T) {
	for _, tt := range []struct {
		method, url string
		want        chaos.Request
		ok          bool
	}{
		{"GET", "/apis/apps/v1/namespaces/web/deployments/api", chaos.Request{Verb: "get", Group: "apps", Resource: "deployments", Namespace: "web", Name: "api"}, true},
		{"GET", "/apis/apps/v1/deployments?labelSelector=a%3Db", chaos.Request{Verb: "list", Group: "apps", Resource: "deployments"}, true},
		{"GET", "/api/v1/namespaces/web/pods?watch=true&resourceVersion=5", chaos.Request{Verb: "watch", Resource: "pods", Namespace: "web"}, true},
		{"GET", "/api/v1/pods?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true", chaos.Request{Verb: "watch", Resource: "pods", InitialEvents: true}, true},
		{"PATCH", "/apis/apps/v1/namespaces/web/deployments/api", chaos.Request{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "web", Name: "api"}, true},
		{"PUT", "/apis/apps/v1/namespaces/web/deployments/api/status", chaos.Request{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "status", Namespace: "web", Name: "api"}, true},
		{"POST", "/api/v1/namespaces/web/pods/p/binding", chaos.Request{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "web", Name: "p"}, true},
		{"DELETE", "/api/v1/namespaces/web/pods", chaos.Request{Verb: "deletecollection", Resource: "pods", Namespace: "web"}, true},
		{"GET", "/api/v1/namespaces/web", chaos.Request{Verb: "get", Resource: "namespaces", Name: "web"}, true},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", chaos.Request{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "x"}, true},
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

func TestTargetMatches(t *testing.T) {
	r := chaos.Request{Verb: "patch", Resource: "deployments", Namespace: "web", Name: "api"}
	assert.True(t, chaos.Target{}.Matches(r))
	assert.True(t, chaos.Target{Verbs: []string{"update", "patch"}, Resource: "deployments", Name: "api"}.Matches(r))
	assert.False(t, chaos.Target{Verbs: []string{"update"}}.Matches(r))
	assert.False(t, chaos.Target{Resource: "pods"}.Matches(r))
	assert.False(t, chaos.Target{Namespace: "other"}.Matches(r))
	assert.False(t, chaos.Target{Name: "db"}.Matches(r))
}
