package sim

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/extproc"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// activeStream is one pass of a downstream request through the HCM filter chain
// (ConnectionManagerImpl::ActiveStream + its FilterManager).
type activeStream struct {
	hcm               *hcmConfig
	ctx               context.Context
	cancel            context.CancelFunc
	wg                sync.WaitGroup
	headers           *stream.Headers
	req               *requestState
	metadata          *stream.Metadata
	chain             *stream.Chain
	routes            *routeTable // the route table snapped at stream start
	redirectCh        chan *redirect
	internallyCreated bool

	// HCM timer inputs (stream_timers.go): decode activity from the codec, a route
	// (re)resolution, the whole request having passed the decoder filters.
	activity     chan struct{}
	routeChanged chan struct{}
	decodeDone   chan struct{}
	remoteDone   remoteDoneFlag

	mu         sync.Mutex
	routeValid bool
	cached     *resolvedRoute
	info       streamInfo
}

// streamInfo is what the router records for attributes and the access log
// (StreamInfo): it is shared by the downstream and upstream filters of the request.
type streamInfo struct {
	clusterName  string
	clusterMD    *corev3.Metadata
	attemptCount uint32
	flags        []string
	details      string
	upstreamHost string
}

func (h *hcmConfig) newStream(parent context.Context, headers *stream.Headers, req *requestState) *activeStream {
	ctx, cancel := context.WithCancel(parent)
	st := &activeStream{
		hcm:        h,
		ctx:        ctx,
		cancel:     cancel,
		headers:    headers,
		req:        req,
		metadata:   stream.NewMetadata(),
		chain:      stream.NewChain(len(h.filters)),
		routes:     h.routes.Load(),
		redirectCh: make(chan *redirect, 1),

		activity:     make(chan struct{}, 1),
		routeChanged: make(chan struct{}, 1),
		decodeDone:   make(chan struct{}, 1),
	}
	// The route is resolved when the stream starts decoding (refreshCachedRoute in
	// ActiveStream::decodeHeaders) and cached until a filter clears it.
	st.route()
	return st
}

// route returns the cached route, resolving it with the current headers if the cache
// was cleared (ActiveStream::route / refreshCachedRoute).
func (st *activeStream) route() *resolvedRoute {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.routeValid {
		st.cached = st.routes.resolve(st.headers)
		st.routeValid = true
		notify(st.routeChanged) // setRoute → refreshIdleTimeout
	}
	return st.cached
}

// cachedRoute is the route the stream has now, without resolving a cleared one (nil when
// none matched or the cache was cleared).
func (st *activeStream) cachedRoute() *route {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cached == nil {
		return nil
	}
	return st.cached.route
}

// clearRouteCache imitates DownstreamStreamFilterCallbacks::clearRouteCache.
func (st *activeStream) clearRouteCache() {
	st.mu.Lock()
	st.routeValid = false
	st.cached = nil
	st.mu.Unlock()
}

// bufferLimit is the listener's per-connection buffer limit, lowered by the route's
// request body buffer limit (ActiveStream::refreshBufferLimit).
func (st *activeStream) bufferLimit() int {
	limit := st.hcm.bufferLimit
	st.mu.Lock()
	rr := st.cached
	st.mu.Unlock()
	if rr != nil && rr.route.bufferLimit > 0 && int(rr.route.bufferLimit) < limit {
		limit = int(rr.route.bufferLimit)
	}
	return limit
}

func (st *activeStream) setCluster(c *cluster) {
	st.mu.Lock()
	st.info.clusterName, st.info.clusterMD = c.name, c.metadata
	st.mu.Unlock()
}

func (st *activeStream) setAttempt(n int, h *host) {
	st.mu.Lock()
	st.info.attemptCount = uint32(n)
	if h != nil {
		st.info.upstreamHost = h.address
	}
	st.mu.Unlock()
}

func (st *activeStream) addFlag(f string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, x := range st.info.flags {
		if x == f {
			return
		}
	}
	st.info.flags = append(st.info.flags, f)
}

func (st *activeStream) setDetails(d string) {
	st.mu.Lock()
	st.info.details = d
	st.mu.Unlock()
}

func (st *activeStream) go_(fn func()) {
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		fn()
	}()
}

// run starts the filters and the router and writes what comes out of the chain to
// the client until the pass ends.
func (st *activeStream) run(out *downstreamWriter) passResult {
	for i, f := range st.hcm.filters {
		cb := &filterCallbacks{st: st, ctx: st.ctx}
		conn, err := st.hcm.s.grpc.get(f.extproc.GrpcCluster, f.extproc.Authority)
		if err != nil {
			// Envoy would have refused the config; surface it as a 500 local reply.
			st.chain.Out.Push(stream.LocalReplyFrame(&stream.LocalReply{Status: 500, Body: err.Error(), Details: "ext_proc_error"}))
			break
		}
		flt := extproc.New(f.extproc, conn, cb, st.hcm.s.log.With("filter", f.name))
		io := st.chain.Filters[i]
		st.go_(func() { flt.Run(st.ctx, io) })
	}
	r := newRouter(st)
	st.go_(func() { r.run(st.ctx) })
	tm := st.startTimers()
	defer func() {
		tm.stop()
		st.cancel()
		st.wg.Wait()
	}()
	for {
		select {
		case <-st.ctx.Done():
			return passResult{clientGone: true}
		case rd := <-st.redirectCh:
			return passResult{redirect: rd}
		case <-st.activity:
			tm.resetIdle()
		case <-st.routeChanged:
			tm.idleTimeout = st.idleTimeout()
			tm.resetIdle()
		case <-st.decodeDone:
			tm.request.stop() // disarmRequestTimeout
		case <-tm.idle.c():
			return st.timeoutReply(out, "stream timeout", "SI", "stream_idle_timeout")
		case <-tm.request.c():
			return st.timeoutReply(out, "request timeout", "", "request_overall_timeout")
		case <-tm.duration.c():
			return st.timeoutReply(out, "downstream duration timeout", "", "max_duration_timeout")
		case <-st.chain.Out.Ready():
			for _, fr := range st.chain.Out.Drain() {
				// Every encode event resets the idle timer; the response starting
				// disarms the request timer.
				tm.resetIdle()
				if fr.Kind == stream.KindHeaders || fr.Kind == stream.KindLocalReply {
					tm.request.stop()
				}
				done, reset := out.write(st, fr)
				if reset {
					return passResult{reset: true}
				}
				if done {
					return passResult{}
				}
			}
		}
	}
}

// downstreamWriter is the downstream codec: it writes encode frames to the client.
type downstreamWriter struct {
	w             http.ResponseWriter
	rc            *http.ResponseController
	serverName    string
	headersSent   bool
	status        int
	bytesSent     int
	localReply    bool
	downstreamRst bool
	// localReplyConfig is the HCM's local_reply_config (nil: none).
	localReplyConfig *localReplyConfig
}

// write returns done when the response is complete, reset when the stream must be
// reset (a local reply after response headers were sent).
func (d *downstreamWriter) write(st *activeStream, fr stream.Frame) (done, reset bool) {
	switch fr.Kind {
	case stream.KindHeaders:
		if d.headersSent {
			return false, false
		}
		d.writeHeaders(fr.Headers)
		if fr.End {
			return true, false
		}
	case stream.KindData:
		if len(fr.Data) > 0 {
			n, err := d.w.Write(fr.Data)
			d.bytesSent += n
			if err != nil {
				return true, false
			}
			_ = d.rc.Flush()
		}
		if fr.End {
			return true, false
		}
	case stream.KindTrailers:
		for _, e := range fr.Headers.All() {
			d.w.Header().Add(http.TrailerPrefix+e.Key, e.Value)
		}
		return true, false
	case stream.KindLocalReply:
		st.setDetails(fr.Reply.Details)
		if fr.Reply.Flag != "" {
			st.addFlag(fr.Reply.Flag)
		}
		if d.headersSent {
			// FilterManager::sendLocalReply: response already started → reset.
			d.downstreamRst = true
			return true, true
		}
		d.writeLocalReply(fr.Reply, isGrpcRequest(st.headers), st.cachedRoute(), replyContext{request: st.headers, md: st.metadata})
		return true, false
	}
	return false, false
}

// writeHeaders is the downstream codec's encodeHeaders: connection-specific headers
// dropped, server header set (server_header_transformation OVERWRITE).
func (d *downstreamWriter) writeHeaders(h *stream.Headers) {
	d.writeHeadersOnly(h)
	_ = d.rc.Flush()
}

// writeHeadersOnly writes the headers without flushing them: if nothing follows,
// Go's server sends them with end_stream when the handler returns.
func (d *downstreamWriter) writeHeadersOnly(h *stream.Headers) {
	status, err := strconv.Atoi(h.Value(":status"))
	if err != nil || status < 100 {
		status = 502
	}
	hdr := d.w.Header()
	for _, e := range h.All() {
		if strings.HasPrefix(e.Key, ":") || hopByHop[e.Key] {
			continue
		}
		switch e.Key {
		case "content-length":
			hdr.Set("Content-Length", e.Value)
		case "server":
		default:
			hdr[e.Key] = append(hdr[e.Key], e.Value)
		}
	}
	// server_header_transformation OVERWRITE (default): server is always server_name.
	hdr["server"] = []string{d.serverName}
	d.w.WriteHeader(status)
	d.headersSent = true
	d.status = status
}

// writeLocalReply imitates Utility::sendLocalReply: the reply headers are built,
// modified by the caller (ImmediateResponse mutations), then content-length and
// content-type: text/plain (unless set) are added for a non-empty body. A gRPC
// request gets a trailers-only gRPC reply instead (Utility::prepareLocalReply /
// encodeLocalReply in source/common/http/utility.cc).
//
// local_reply_config rewrites the status and body after the caller's header mutations
// (encode_functions.rewrite_ in prepareLocalReply); its content-type is set when the body
// changed or the reply has none.
func (d *downstreamWriter) writeLocalReply(r *stream.LocalReply, grpcRequest bool, rt *route, ctx replyContext) {
	h := stream.NewHeaders(":status", strconv.Itoa(r.Status))
	rt.finalizeResponseHeaders(h)
	if r.Mutate != nil {
		r.Mutate(h)
	}
	original, rewritten := r.Body, *r
	var contentType string
	rewritten.Status, rewritten.Body, contentType = d.localReplyConfig.rewrite(ctx, r)
	r = &rewritten
	if grpcRequest {
		d.writeGrpcLocalReply(r, h)
		return
	}
	if r.Body != "" {
		h.Set("content-length", strconv.Itoa(len(r.Body)))
		if r.Body != original || !h.Has("content-type") {
			h.Set("content-type", contentType)
		}
	}
	h.Set(":status", strconv.Itoa(r.Status))
	d.localReply = true
	d.writeHeaders(h)
	if r.Body != "" {
		n, _ := d.w.Write([]byte(r.Body))
		d.bytesSent += n
	}
}

// filterCallbacks implements stream.Callbacks for a downstream filter (u == nil) or
// an upstream filter of attempt u.
type filterCallbacks struct {
	st  *activeStream
	u   *upstreamRequest
	ctx context.Context
}

func (c *filterCallbacks) ClearRouteCache() {
	if c.u == nil {
		c.st.clearRouteCache()
	}
}
func (c *filterCallbacks) DynamicMetadata() *stream.Metadata { return c.st.metadata }
func (c *filterCallbacks) Attributes() stream.Attributes     { return attrSource{c.st, c.u} }
func (c *filterCallbacks) BufferLimit() int                  { return c.st.bufferLimit() }
func (c *filterCallbacks) IsUpstream() bool                  { return c.u != nil }
func (c *filterCallbacks) Context() context.Context          { return c.ctx }
func (c *filterCallbacks) Go(fn func())                      { c.st.go_(fn) }
func (c *filterCallbacks) Inc(counter string)                { c.st.hcm.s.stats.inc(counter) }

// attrSource answers ext_proc attribute lookups (the CEL activation's StreamInfo).
type attrSource struct {
	st *activeStream
	u  *upstreamRequest
}

func (a attrSource) RequestHeaders() *stream.Headers { return a.st.headers }
func (a attrSource) RouteName() string {
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	if a.st.cached == nil {
		return ""
	}
	return a.st.cached.route.name
}
func (a attrSource) ClusterName() string {
	if a.u != nil {
		return a.u.host.cluster.name
	}
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	return a.st.info.clusterName
}
func (a attrSource) ClusterMetadata() *corev3.Metadata {
	if a.u != nil {
		return a.u.host.cluster.metadata
	}
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	return a.st.info.clusterMD
}
func (a attrSource) UpstreamHostMetadata() *corev3.Metadata {
	if a.u == nil {
		return nil
	}
	return a.u.host.metadata
}
func (a attrSource) AttemptCount() uint32 {
	if a.u != nil {
		return uint32(a.u.attempt)
	}
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	return a.st.info.attemptCount
}
