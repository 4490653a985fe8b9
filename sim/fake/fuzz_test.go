package fake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/sim/fake"
)

// FuzzREST sends the REST door whatever a client could: any method, path,
// query, media type and body. It must answer every request with a status
// code and a JSON body, a metav1.Status for every error, and never panic
// (the handler turns a panic into a 500 that says so, which fails here).
func FuzzREST(f *testing.F) {
	for _, seed := range []struct{ method, path, query, contentType, body string }{
		{"GET", "/api/v1/namespaces/converge/pods", "limit=2&labelSelector=app%3Dweb", "", ""},
		{"GET", "/api/v1/namespaces/converge/pods", "watch=true&timeoutSeconds=0&resourceVersion=1", "", ""},
		{"POST", "/api/v1/namespaces/converge/configmaps", "", "application/json", `{"metadata":{"name":"a"},"data":{"k":"v"}}`},
		{"POST", "/api/v1/namespaces/converge/configmaps", "", "application/yaml", "metadata:\n  generateName: a-\n"},
		{"PUT", "/api/v1/namespaces/converge/configmaps/a", "fieldManager=x", "application/json", `{"metadata":{"name":"a","resourceVersion":"1"}}`},
		{"PATCH", "/api/v1/namespaces/converge/configmaps/a", "", "application/json-patch+json", `[{"op":"add","path":"/data/x","value":"y"}]`},
		{"PATCH", "/api/v1/namespaces/converge/configmaps/a", "", "application/strategic-merge-patch+json", `{"data":{"x":null}}`},
		{"PATCH", "/api/v1/namespaces/converge/configmaps/b", "fieldManager=me&force=true", "application/apply-patch+yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: v\n"},
		{"DELETE", "/api/v1/namespaces/converge/configmaps/a", "gracePeriodSeconds=0", "application/json", `{"propagationPolicy":"Foreground"}`},
		{"DELETE", "/api/v1/namespaces/converge/configmaps", "labelSelector=x%21%3Dy", "", ""},
		{"GET", "/apis/apps/v1/namespaces/converge/deployments/web/scale", "", "", ""},
		{"PUT", "/apis/apps/v1/namespaces/converge/deployments/web/scale", "", "application/json", `{"spec":{"replicas":-1}}`},
		{"POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", "application/json", `{"metadata":{"name":"xs.example.com"},"spec":{"group":"example.com","names":{"plural":"xs","kind":"X"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`},
		{"GET", "/apis", "", "", ""},
		{"GET", "/api/v1/namespaces/converge/pods", "continue=eyJydiI6MSwic3RhcnQiOiIvIn0&limit=1", "", ""},
		{"POST", "/api/v1/namespaces/converge/pods/p/binding", "", "application/json", `{"metadata":{"name":"p"},"target":{"name":"n"}}`},
	} {
		f.Add(seed.method, seed.path, seed.query, seed.contentType, []byte(seed.body))
	}
	b, err := fake.New(fake.Config{})
	require.NoError(f, err)
	env, err := b.Start(context.Background())
	require.NoError(f, err)
	f.Cleanup(func() { _ = b.Stop() })
	hc, err := rest.HTTPClientFor(env.RESTConfig)
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, method, path, query, contentType string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return
		}
		req, err := http.NewRequest(method, env.RESTConfig.Host+path+"?"+query, strings.NewReader(string(body)))
		if err != nil {
			return // not a request a client could send
		}
		if q := req.URL.Query(); q.Get("watch") != "" {
			// A watch streams until its client goes: bound it.
			q.Set("timeoutSeconds", "0")
			q.Del("watch")
			req.URL.RawQuery = q.Encode()
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.True(t, resp.StatusCode >= 200 && resp.StatusCode < 600, "status %d", resp.StatusCode)
		if resp.StatusCode >= 400 {
			var status metav1.Status
			require.NoError(t, json.Unmarshal(data, &status), "an error is a Status: %s", data)
			require.Equal(t, int32(resp.StatusCode), status.Code, "%s", data)
			require.NotContains(t, status.Message, "panicked", "%s %s?%s: %s", method, path, query, data)
		} else {
			require.True(t, json.Valid(data), "%s %s: %s", method, path, data)
		}
	})
}
