package fake

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/utils/clock"
)

// BenchmarkRESTHandler is the REST door's own share of a request: the
// handler alone, from a parsed request to the encoded answer, without
// client-go's request building and decoding, which BenchmarkRequest/rest
// includes.
func BenchmarkRESTHandler(b *testing.B) {
	s := newStore(clock.RealClock{}, 20_000)
	h := &handler{s: s}
	do := func(method, path, contentType, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://fake.invalid"+path, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do("POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"converge"}}`); rec.Code != http.StatusCreated {
		b.Fatal(rec.Body.String())
	}
	deployment := `{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"registry.invalid/app:1"}]}}}}`
	if rec := do("POST", "/apis/apps/v1/namespaces/converge/deployments", "application/json", deployment); rec.Code != http.StatusCreated {
		b.Fatal(rec.Body.String())
	}
	b.Run("get-deployment", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if rec := do("GET", "/apis/apps/v1/namespaces/converge/deployments/web", "", ""); rec.Code != http.StatusOK {
				b.Fatal(rec.Body.String())
			}
		}
	})
	b.Run("patch-deployment", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, i%50+1)
			if rec := do("PATCH", "/apis/apps/v1/namespaces/converge/deployments/web", "application/merge-patch+json", patch); rec.Code != http.StatusOK {
				b.Fatal(rec.Body.String())
			}
		}
	})
	pods := 0
	b.Run("create-pod", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			pods++
			pod := fmt.Sprintf(`{"metadata":{"name":"p-%d","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"registry.invalid/app:1"}]}}`, pods)
			if rec := do("POST", "/api/v1/namespaces/converge/pods", "application/json", pod); rec.Code != http.StatusCreated {
				b.Fatal(rec.Body.String())
			}
		}
	})
	s.stop()
}
