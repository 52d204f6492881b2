// Package admin serves switchyard's operator HTTP endpoints: liveness, readiness and metrics
// (Handler, for the operator listener, which kubelet and Prometheus reach); and the admin
// API of behaviour §11 with the deployment status report of behaviour §10.3 (NewAPI, for the admin
// listener, behind the master key).
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/switchyard-gw/switchyard/routing"
)

// Readiness reports a component's state for /readyz. Ready false fails the probe; Degraded
// marks a component that still serves, worse than normal (a Redis outage: routing on local
// state), and keeps the probe passing; Detail is shown either way and must never hold a
// secret.
type Readiness struct {
	Name     string `json:"name"`
	Ready    bool   `json:"ready"`
	Degraded bool   `json:"degraded,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Options configure the handler.
type Options struct {
	// Checks are run by /readyz.
	Checks []func(context.Context) Readiness
	// Metrics serves /metrics (Prometheus); nil leaves the path unrouted.
	Metrics http.Handler
	// Profiling serves Go's runtime profiles under /debug/pprof/ (-operator-pprof): an
	// operator measuring a replica under load. They show code paths and timings, never
	// request content; off by default.
	Profiling bool
}

// Handler returns the operator HTTP handler: nothing on it needs a key, so nothing on it
// shows configuration or routing state.
func Handler(r *routing.Router, opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ready := r.Config() != nil
		checks := []Readiness{{Name: "config", Ready: ready}}
		for _, check := range opts.Checks {
			c := check(req.Context())
			checks = append(checks, c)
			ready = ready && c.Ready
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, map[string]any{"ready": ready, "checks": checks})
	})
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	if opts.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// statusView is a deployment's status with, when the xDS server left it out of the
// snapshot, why (Envoys have no cluster for it, so routing it fails).
type statusView struct {
	routing.DeploymentStatus
	NotPublished string `json:"not_published,omitempty"`
}

// statusHandler serves the deployment status report of behaviour §10.3 (authentication is the
// caller's); omitted (nil: none) marks deployments without a cluster.
func statusHandler(r *routing.Router, omitted func() map[string]string, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		model := req.PathValue("model")
		statuses, ok, err := r.Status(req.Context(), model)
		switch {
		case err != nil:
			log.Error("deployment status failed", "model", model, "err", err)
			writeError(w, http.StatusServiceUnavailable, "api_error", "store_unavailable", "The routing state could not be read.")
		case !ok:
			writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "The model `"+model+"` does not exist.")
		default:
			var out map[string]string
			if omitted != nil {
				out = omitted()
			}
			views := make([]statusView, len(statuses))
			for i, st := range statuses {
				views[i] = statusView{DeploymentStatus: st, NotPublished: out[st.ID]}
			}
			writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": model, "data": views})
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape, the dialect of the /v1 paths.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
}
