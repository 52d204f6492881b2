package ads

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

type adsStream = grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]

// scriptedServer hands each ADS stream to the test, which plays the server's side
// message by message: it can send what go-control-plane never would (undecodable
// resources, unsubscribed types, TTL envelopes).
type scriptedServer struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	streams chan adsStream
	done    chan struct{}
}

func (s *scriptedServer) StreamAggregatedResources(st adsStream) error {
	select {
	case s.streams <- st:
	case <-s.done:
		return nil
	case <-st.Context().Done():
		return nil
	}
	select {
	case <-s.done:
	case <-st.Context().Done():
	}
	return nil
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatalf("anypb.New: %v", err)
	}
	return a
}

func recvWithin(t *testing.T, st adsStream) *discoveryv3.DiscoveryRequest {
	t.Helper()
	type result struct {
		req *discoveryv3.DiscoveryRequest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		req, err := st.Recv()
		ch <- result{req, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Recv: %v", r.err)
		}
		return r.req
	case <-time.After(waitTimeout):
		t.Fatalf("no request from the client")
		return nil
	}
}

func send(t *testing.T, st adsStream, resp *discoveryv3.DiscoveryResponse) {
	t.Helper()
	if err := st.Send(resp); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

// startScripted runs a Client against a scriptedServer and returns the server side
// of its first stream.
func startScripted(t *testing.T, h Handler) (adsStream, *Client) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ss := &scriptedServer{streams: make(chan adsStream, 1), done: make(chan struct{})}
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, ss)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		close(ss.done)
		gs.Stop()
	})
	c := startClient(t, lis.Addr().String(), h, nil)
	select {
	case st := <-ss.streams:
		return st, c
	case <-time.After(waitTimeout):
		t.Fatal("client never opened a stream")
		return nil, nil
	}
}

// TestProtocolEdges drives the client with hand-written responses and checks each
// request it answers with, in stream order (so "the next request" proves nothing was
// sent in between):
//   - node on the first request only;
//   - responses for types never subscribed (LDS, and EDS before any EDS name) are
//     ignored without ACK or NACK;
//   - a resource whose type URL differs from the response's, and undecodable bytes,
//     are NACKed with the previous version and the response's nonce;
//   - a TTL heartbeat (Resource envelope without body) is ACKed without calling the
//     handler; a Resource envelope with a body is unwrapped;
//   - a later EDS subscription carries no nonce (the ignored EDS response left no
//     state, as in Envoy), and resources that were not requested are dropped before
//     the handler.
func TestProtocolEdges(t *testing.T) {
	h := &recHandler{}
	st, c := startScripted(t, h)

	first := recvWithin(t, st)
	if first.GetTypeUrl() != ClusterType || first.GetNode().GetId() != nodeID ||
		len(first.GetResourceNames()) != 0 || first.GetVersionInfo() != "" {
		t.Fatalf("first request = %v, want wildcard CDS with node", first)
	}

	// Types the client never subscribed to: ignored.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", VersionInfo: "l1", Nonce: "n1",
		Resources: []*anypb.Any{mustAny(t, &listenerv3.Listener{Name: "l"})},
	})
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: EndpointType, VersionInfo: "e1", Nonce: "n1b",
		Resources: []*anypb.Any{mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "a"})},
	})

	// A CLA inside a CDS response: NACK.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c1", Nonce: "n2",
		Resources: []*anypb.Any{mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "a"})},
	})
	nack := recvWithin(t, st)
	if nack.GetTypeUrl() != ClusterType || nack.GetResponseNonce() != "n2" || nack.GetVersionInfo() != "" ||
		!strings.Contains(nack.GetErrorDetail().GetMessage(), "does not match the response type URL") {
		t.Errorf("request after type-mismatch response = %v, want CDS NACK of n2 at version \"\"", nack)
	}
	if nack.GetNode() != nil {
		t.Errorf("node sent again on a later request: %v", nack.GetNode())
	}

	// Undecodable bytes: NACK.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c2", Nonce: "n3",
		Resources: []*anypb.Any{{TypeUrl: ClusterType, Value: []byte{0xff, 0xff}}},
	})
	nack = recvWithin(t, st)
	if nack.GetResponseNonce() != "n3" || nack.GetVersionInfo() != "" || nack.GetErrorDetail() == nil {
		t.Errorf("request after undecodable response = %v, want NACK of n3 at version \"\"", nack)
	}

	// A valid update: ACK, handler called.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c3", Nonce: "n4",
		Resources: []*anypb.Any{mustAny(t, &clusterv3.Cluster{Name: "a"})},
	})
	ack := recvWithin(t, st)
	if ack.GetResponseNonce() != "n4" || ack.GetVersionInfo() != "c3" || ack.GetErrorDetail() != nil {
		t.Errorf("request after valid response = %v, want ACK of n4 at c3", ack)
	}

	// Heartbeat only: ACK, handler not called.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c3", Nonce: "n5",
		Resources: []*anypb.Any{mustAny(t, &discoveryv3.Resource{Name: "a", Ttl: durationpb.New(time.Second)})},
	})
	ack = recvWithin(t, st)
	if ack.GetResponseNonce() != "n5" || ack.GetVersionInfo() != "c3" || ack.GetErrorDetail() != nil {
		t.Errorf("request after heartbeat = %v, want ACK of n5 at c3", ack)
	}

	// Envelope with a body: unwrapped.
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c4", Nonce: "n6",
		Resources: []*anypb.Any{mustAny(t, &discoveryv3.Resource{Name: "b", Resource: mustAny(t, &clusterv3.Cluster{Name: "b"})})},
	})
	ack = recvWithin(t, st)
	if ack.GetResponseNonce() != "n6" || ack.GetVersionInfo() != "c4" || ack.GetErrorDetail() != nil {
		t.Errorf("request after wrapped resource = %v, want ACK of n6 at c4", ack)
	}

	// Resources that were not requested are dropped before the handler sees them.
	c.SubscribeEndpoints([]string{"a"})
	eds := recvWithin(t, st)
	if eds.GetTypeUrl() != EndpointType || !slices.Equal(eds.GetResourceNames(), []string{"a"}) ||
		eds.GetResponseNonce() != "" || eds.GetVersionInfo() != "" {
		t.Errorf("EDS subscription = %v, want names [a], no nonce, no version", eds)
	}
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: EndpointType, VersionInfo: "e2", Nonce: "n7",
		Resources: []*anypb.Any{
			mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "a"}),
			mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "b"}),
		},
	})
	ack = recvWithin(t, st)
	if ack.GetTypeUrl() != EndpointType || ack.GetResponseNonce() != "n7" || ack.GetVersionInfo() != "e2" {
		t.Errorf("request after EDS response = %v, want EDS ACK of n7 at e2", ack)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.endpoints) != 1 || !hasUpdate(h.endpoints, "e2", "a") {
		t.Errorf("handler saw endpoints %v, want only e2 [a]", h.endpoints)
	}
	want := []update{{"c3", []string{"a"}}, {"c4", []string{"b"}}}
	if len(h.clusters) != len(want) || !hasUpdate(h.clusters, "c3", "a") || !hasUpdate(h.clusters, "c4", "b") {
		t.Errorf("handler saw %v, want %v", h.clusters, want)
	}
}

// TestNACKDetailIsBoundedUTF8 proves a huge, non-UTF-8 handler error still yields a
// NACK (not a broken stream): the message is cut to 4 KiB like Envoy's
// truncateGrpcStatusMessage and made valid UTF-8, as proto strings must be.
func TestNACKDetailIsBoundedUTF8(t *testing.T) {
	h := &recHandler{rejectClusters: func(string) error {
		return errors.New(strings.Repeat("\xff", 10000))
	}}
	st, _ := startScripted(t, h)
	recvWithin(t, st)
	send(t, st, &discoveryv3.DiscoveryResponse{
		TypeUrl: ClusterType, VersionInfo: "c1", Nonce: "n1",
		Resources: []*anypb.Any{mustAny(t, &clusterv3.Cluster{Name: "a"})},
	})
	nack := recvWithin(t, st)
	msg := nack.GetErrorDetail().GetMessage()
	if nack.GetResponseNonce() != "n1" || msg == "" || !utf8.ValidString(msg) || len(msg) > 3*maxErrorDetailBytes {
		t.Errorf("NACK nonce %q, detail of %d bytes (valid UTF-8: %v)", nack.GetResponseNonce(), len(msg), utf8.ValidString(msg))
	}
}
