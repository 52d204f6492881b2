package fakeprovider

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/tidwall/gjson"
)

// Request is one request the fake received, recorded before it is answered so that tests
// can assert what the gateway sent (its URL, header and body rewrites).
type Request struct {
	Method string
	// Path is the URL path as received.
	Path string
	// Query is the parsed query string (Azure's api-version lives there).
	Query  url.Values
	Header http.Header
	Body   []byte
	// Time is when the fake started reading the request.
	Time time.Time
	// Model is the body "model", or the Azure deployment on deployment-scoped routes.
	Model string
	// Stream reports whether the body asked for SSE ("stream": true).
	Stream bool
	// Status is the status code the fake answered with; 0 if it never wrote headers
	// (e.g. the client went away during HeaderDelay).
	Status int
	// Fault is a copy of the fault applied, or nil.
	Fault *Fault
}

// Get returns the value at a gjson path of the request body, e.g. r.Get("model") or
// r.Get("stream_options.include_usage").
func (r Request) Get(path string) gjson.Result { return gjson.GetBytes(r.Body, path) }

func (r Request) clone() Request {
	r.Query = cloneValues(r.Query)
	r.Header = r.Header.Clone()
	r.Body = bytes.Clone(r.Body)
	if r.Fault != nil {
		f := *r.Fault
		f.Header = f.Header.Clone()
		if f.Content != nil {
			c := *f.Content
			f.Content = &c
		}
		r.Fault = &f
	}
	return r
}

func cloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// record appends r and returns its index and the Reset generation, for later updates.
func (s *Server) record(r Request) (int, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r)
	close(s.recorded)
	s.recorded = make(chan struct{})
	return len(s.records) - 1, s.gen
}

// WaitRequests blocks until at least n requests have been recorded since New or the last
// Reset, or ctx ends. Requests are recorded when they arrive, before they are answered,
// so tests can wait for a request that the fake is stalling.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := len(s.records), s.recorded
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakeprovider: %d of %d requests recorded: %w", got, n, ctx.Err())
		}
	}
}

// updateRecord applies fn to record i unless Reset dropped it meanwhile.
func (s *Server) updateRecord(i int, gen uint64, fn func(*Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen || i >= len(s.records) {
		return
	}
	fn(&s.records[i])
}

// Requests returns copies of the requests received since New or the last Reset, oldest
// first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.records))
	for i, r := range s.records {
		out[i] = r.clone()
	}
	return out
}

// LastRequest returns the most recent request, if any.
func (s *Server) LastRequest() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		return Request{}, false
	}
	return s.records[len(s.records)-1].clone(), true
}
