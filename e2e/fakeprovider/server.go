package fakeprovider

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// maxBody bounds what the fake reads; Anthropic documents 32 MB for Messages
// (wire-formats §3.4).
const maxBody = 32 << 20

// Server is one fake provider. It is an http.Handler and safe for concurrent use.
type Server struct {
	opts    Options
	content Content // opts.Content with defaults

	done      chan struct{} // closed by Close to release stalled handlers
	closeOnce sync.Once

	mu         sync.Mutex
	gen        uint64 // bumped by Reset so late updates skip dropped records
	seq        int    // per-request counter for deterministic ids
	queue      []*scripted
	headerUses map[string]int // uses of counted header faults, by spec
	records    []Request
	recorded   chan struct{} // closed and replaced on every new record, for WaitRequests
}

type scripted struct {
	fault Fault
	left  int // remaining uses; Always means unlimited
}

// New returns a fake provider for opts.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Created == 0 {
		opts.Created = DefaultCreated
	}
	return &Server{
		opts:       opts,
		content:    opts.Content.withDefaults(),
		done:       make(chan struct{}),
		headerUses: map[string]int{},
		recorded:   make(chan struct{}),
	}, nil
}

// NewTestServer starts a fake on an httptest.Server and closes both when tb ends.
func NewTestServer(tb testing.TB, opts Options) (*Server, *httptest.Server) {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(s)
	tb.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts
}

// Kind returns the dialect the server speaks.
func (s *Server) Kind() Kind { return s.opts.Kind }

// Script queues faults. Each request takes the first queued fault that matches its path
// and model and consumes one of its uses; requests that match none answer normally (or
// per FaultHeader). Scripted faults win over FaultHeader.
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		// Keep no reference to the caller's map or Content.
		f.Header = f.Header.Clone()
		if f.Content != nil {
			c := *f.Content
			f.Content = &c
		}
		left := f.Times
		if left == 0 {
			left = 1
		}
		s.queue = append(s.queue, &scripted{fault: f, left: left})
	}
}

// Pending returns how many scripted faults still have uses left (Always counts as one).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Reset drops recorded requests, scripted faults and header-fault counters, and restarts
// the id sequence.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.seq = 0
	s.queue = nil
	s.records = nil
	s.headerUses = map[string]int{}
}

// Close releases handlers that are stalling, so that an httptest.Server can shut down
// without waiting for scripted delays. The Server answers nothing afterwards
// (requests get 503).
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ServeHTTP records the request, admits it as the provider would (route, auth, body),
// picks its fault and answers. RequestsPath lists what was recorded.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == RequestsPath {
		s.serveRequests(w, r)
		return
	}
	start := time.Now()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody))
	x := &exchange{s: s, w: w, r: r, body: body, id: s.nextID()}
	rejected := x.admit()
	x.recIdx, x.recGen = s.record(Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
		Time:   start,
		Model:  x.route.model,
		Stream: x.route.stream,
	})
	switch {
	case s.closed():
		x.closedResponse()
		return
	case readErr != nil:
		x.sendError(x.errorFor(BadRequest, nil).withMessage(fmt.Sprintf("reading body: %v", readErr)))
		return
	case rejected != nil:
		x.sendError(*rejected)
		return
	}

	fault, err := s.pickFault(r, x.route)
	if err != nil {
		// A malformed FaultHeader is a test bug: say so loudly, in the provider's shape.
		x.sendError(x.errorFor(BadRequest, nil).withMessage("fakeprovider: " + err.Error()))
		return
	}
	x.content = s.content
	if fault != nil {
		f := *fault
		s.updateRecord(x.recIdx, x.recGen, func(rq *Request) { rq.Fault = &f })
		if fault.Content != nil {
			x.content = s.content.overlay(*fault.Content).withDefaults()
			if err := x.content.validate(); err != nil {
				x.sendError(x.errorFor(BadRequest, nil).withMessage("fakeprovider: fault " + err.Error()))
				return
			}
		}
	}
	x.fault = fault
	x.serve()
}

func (s *Server) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// pickFault consumes the first matching scripted fault, else the first matching fault of
// FaultHeader that has uses left.
func (s *Server) pickFault(r *http.Request, rt route) (*Fault, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sc := range s.queue {
		if !sc.fault.matches(r.URL.Path, rt.model) {
			continue
		}
		if sc.left != Always {
			sc.left--
			if sc.left == 0 {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
			}
		}
		f := sc.fault
		return &f, nil
	}
	hfs, err := ParseFaultHeader(r.Header.Values(FaultHeader)...)
	if err != nil {
		return nil, err
	}
	for _, hf := range hfs {
		if hf.Server != "" && hf.Server != s.opts.Name {
			continue
		}
		if !hf.matches(r.URL.Path, rt.model) {
			continue
		}
		if hf.Counted {
			if s.headerUses[hf.Spec] >= hf.Times {
				continue
			}
			s.headerUses[hf.Spec]++
		}
		f := hf.Fault
		return &f, nil
	}
	return nil, nil
}
