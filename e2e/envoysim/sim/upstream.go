package sim

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/extproc"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

type attemptEventKind int

const (
	evPoolReady attemptEventKind = iota
	// evPoolFailed: the connect failed; the router answers with a flush marker
	// through the upstream filters (see codec.run).
	evPoolFailed
	// evReset is the pool failure, after the flush: UpstreamRequest::onPoolFailure.
	evReset
)

type attemptEvent struct {
	kind   attemptEventKind
	reason resetReason
	detail string
}

// upstreamRequest imitates Router::UpstreamRequest: one attempt, with its own
// upstream filter chain (created per attempt, so an upstream ext_proc opens one gRPC
// stream per attempt) ending in the upstream codec.
type upstreamRequest struct {
	r       *router
	st      *activeStream
	host    *host
	attempt int
	ctx     context.Context
	cancel  context.CancelFunc
	chain   *stream.Chain
	encOut  *stream.Queue[stream.Frame]
	ctrl    chan attemptEvent

	createPerTryOnComplete bool
	retried                bool // only set by hedging, which envoysim does not implement
	started                atomic.Bool
	endOnce                sync.Once
}

func newUpstreamRequest(r *router, h *host, attempt int) *upstreamRequest {
	ctx, cancel := context.WithCancel(r.st.ctx)
	return &upstreamRequest{
		r:       r,
		st:      r.st,
		host:    h,
		attempt: attempt,
		ctx:     ctx,
		cancel:  cancel,
		ctrl:    make(chan attemptEvent, 8),
	}
}

// start imitates the UpstreamRequest constructor and acceptHeadersFromRouter: the host
// is fixed, the connection is requested (in parallel with the upstream filters), and
// the router's shared request header map enters the upstream filter chain.
func (u *upstreamRequest) start(headers *stream.Headers, end bool) {
	c := u.host.cluster
	filters := c.upstreamFilters
	if !c.hasFilterConfig {
		filters = u.r.cfg.upstreamFilters
	}
	u.chain = stream.NewChain(len(filters))
	u.encOut = u.chain.Out
	u.host.active.Add(1)
	for i, f := range filters {
		conn, err := u.st.hcm.s.grpc.get(f.extproc.GrpcCluster, f.extproc.Authority)
		if err != nil {
			u.chain.Out.Push(stream.LocalReplyFrame(&stream.LocalReply{Status: 500, Body: err.Error(), Details: "ext_proc_error"}))
			return
		}
		cb := &filterCallbacks{st: u.st, u: u, ctx: u.ctx}
		flt := extproc.New(f.extproc, conn, cb, u.st.hcm.s.log.With("filter", f.name, "attempt", u.attempt))
		io := u.chain.Filters[i]
		u.st.go_(func() { flt.Run(u.ctx, io) })
	}
	cd := &codec{u: u, in: u.chain.TermIn, out: u.chain.TermOut}
	u.st.go_(cd.run)
	u.chain.In.Push(stream.HeadersFrame(headers, end))
}

func (u *upstreamRequest) sendData(b []byte, end bool) {
	u.chain.In.Push(stream.DataFrame(b, end))
}

func (u *upstreamRequest) sendTrailers(t *stream.Headers) {
	u.chain.In.Push(stream.TrailersFrame(t))
}

// reset imitates UpstreamRequest::resetStream: the attempt's filters are destroyed
// (an upstream ext_proc stream is cancelled) and the upstream stream is reset.
func (u *upstreamRequest) reset() { u.end() }

// complete releases the attempt after its response completed.
func (u *upstreamRequest) complete() { u.end() }

func (u *upstreamRequest) end() {
	u.endOnce.Do(func() {
		u.cancel()
		u.host.active.Add(-1)
	})
}

// event delivers a codec event to the router without blocking after the attempt ended.
func (u *upstreamRequest) event(ev attemptEvent) {
	select {
	case u.ctrl <- ev:
	case <-u.ctx.Done():
	}
}
