package sim

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// grpcConns holds one gRPC client connection per envoy_grpc cluster, as Envoy keeps
// one async client per cluster (Grpc::AsyncClientManagerImpl). The connection goes
// to the cluster's first priority-0 host; its transport socket gives TLS.
type grpcConns struct {
	s     *Sim
	mu    sync.Mutex
	conns map[string]*grpcConn
}

type grpcConn struct {
	cc      *grpc.ClientConn
	limited limitedConn
}

// get returns the cluster's connection, its streams within the cluster's max_requests.
func (g *grpcConns) get(clusterName, authority string) (grpc.ClientConnInterface, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := clusterName + "|" + authority
	if c, ok := g.conns[key]; ok {
		return c.limited, nil
	}
	c := g.s.cm.get(clusterName)
	if c == nil {
		return nil, fmt.Errorf("unknown gRPC client cluster %q", clusterName)
	}
	hs := c.hosts.Load()
	if hs == nil || hs.totalHostCount == 0 {
		return nil, fmt.Errorf("gRPC cluster %q has no hosts", clusterName)
	}
	var h *host
	for _, p := range hs.priorities {
		if len(p) > 0 {
			h = p[0]
			break
		}
	}
	creds := insecure.NewCredentials()
	if h.tls != nil {
		creds = credentials.NewTLS(h.tls.cfg.Clone())
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if authority != "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	cc, err := grpc.NewClient("passthrough:///"+h.address, opts...)
	if err != nil {
		return nil, fmt.Errorf("gRPC cluster %q: %w", clusterName, err)
	}
	gc := &grpcConn{cc: cc, limited: limitedConn{ClientConnInterface: cc, requests: &c.requests}}
	g.conns[key] = gc
	return gc.limited, nil
}

func (g *grpcConns) closeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, c := range g.conns {
		_ = c.cc.Close()
		delete(g.conns, k)
	}
}
