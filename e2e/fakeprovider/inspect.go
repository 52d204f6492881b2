package fakeprovider

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// RequestsPath lists, as JSON, the requests the fake received since New or the last
// Reset (GET only, no auth, never recorded itself): what Requests returns, for black-box
// tests that reach a fake only over HTTP (the demo, docker-compose).
const RequestsPath = "/_fake/requests"

// RequestView is one element of the RequestsPath answer.
type RequestView struct {
	Method string              `json:"method"`
	Path   string              `json:"path"`
	Query  url.Values          `json:"query"`
	Header map[string][]string `json:"header"`
	// Body is the request body as text.
	Body   string    `json:"body"`
	Time   time.Time `json:"time"`
	Model  string    `json:"model"`
	Stream bool      `json:"stream"`
	// Status is the status the fake answered with, 0 before it wrote one.
	Status int `json:"status"`
}

func (s *Server) serveRequests(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "fakeprovider: "+RequestsPath+" takes GET", http.StatusMethodNotAllowed)
		return
	}
	reqs := s.Requests()
	out := make([]RequestView, len(reqs))
	for i, rq := range reqs {
		out[i] = RequestView{Method: rq.Method, Path: rq.Path, Query: rq.Query, Header: rq.Header,
			Body: string(rq.Body), Time: rq.Time, Model: rq.Model, Stream: rq.Stream, Status: rq.Status}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
