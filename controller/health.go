package controller

import (
	"errors"
	"net/http"
)

// Ready reports whether the scaler is doing its work: caches synced, Lease
// held (when electing) and workers started. It turns false first at
// shutdown.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return errors.New("not ready: " + c.phase.Load().(string))
	}
	return nil
}

// Healthy reports liveness: it fails only when this instance believes it
// leads but has not renewed its Lease for longer than the lease duration,
// a state a restart fixes.
func (c *Controller) Healthy() error {
	if c.leaderHealth == nil {
		return nil
	}
	return c.leaderHealth.Check(nil)
}

// HealthHandler serves /healthz (liveness) and /readyz (readiness).
func (c *Controller) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", probe(c.Healthy))
	mux.HandleFunc("/readyz", probe(c.Ready))
	return mux
}

func probe(check func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
