package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchyard-gw/switchyard/internal/testlog"
)

// grpcCall dials addr over TLS trusting ca (the system roots when ""), with the client
// certificate when given, and makes one call; it returns the call's error.
func grpcCall(t *testing.T, addr, ca string, cert *tls.Certificate, call func(context.Context, *grpc.ClientConn) error) error {
	t.Helper()
	c := &tls.Config{ServerName: "redis.test", MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		c.RootCAs = x509.NewCertPool()
		c.RootCAs.AppendCertsFromPEM(pem)
	}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return call(ctx, conn)
}

func healthCall(ctx context.Context, conn *grpc.ClientConn) error {
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return os.ErrInvalid
	}
	return err
}

// adsCall asks the ADS server for the clusters and waits for its answer.
func adsCall(ctx context.Context, conn *grpc.ClientConn) error {
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// TestGRPCListenersOverTLS: with -extproc-tls-* the ext_proc server (Health) and with
// -xds-tls-* the ADS server answer clients that trust the CA and only them; with a client
// CA they also require a client certificate of it (mutual TLS).
func TestGRPCListenersOverTLS(t *testing.T) {
	p := newPKI(t)
	clientCert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("tls", func(t *testing.T) {
		in := start(t, "-config", writeConfig(t, "t1"), "-extproc-tls-cert", p.serverCert, "-extproc-tls-key", p.serverKey,
			"-xds-tls-cert", p.serverCert, "-xds-tls-key", p.serverKey)
		if err := grpcCall(t, in.extproc, p.ca, nil, healthCall); err != nil {
			t.Fatalf("ext_proc Health with the CA: %v", err)
		}
		if err := grpcCall(t, in.extproc, "", nil, healthCall); err == nil {
			t.Fatal("ext_proc Health without the CA succeeded")
		}
		if err := grpcCall(t, in.xds, p.ca, nil, adsCall); err != nil {
			t.Fatalf("ADS with the CA: %v", err)
		}
		if err := grpcCall(t, in.xds, "", nil, adsCall); err == nil {
			t.Fatal("ADS without the CA succeeded")
		}
	})
	t.Run("mutual tls", func(t *testing.T) {
		in := start(t, "-config", writeConfig(t, "t1"), "-extproc-tls-cert", p.serverCert, "-extproc-tls-key", p.serverKey,
			"-extproc-tls-client-ca", p.ca, "-xds-tls-cert", p.serverCert, "-xds-tls-key", p.serverKey, "-xds-tls-client-ca", p.ca)
		for name, addr := range map[string]string{"ext_proc": in.extproc, "xds": in.xds} {
			call := healthCall
			if name == "xds" {
				call = adsCall
			}
			if err := grpcCall(t, addr, p.ca, &clientCert, call); err != nil {
				t.Fatalf("%s with a client certificate: %v", name, err)
			}
			if err := grpcCall(t, addr, p.ca, nil, call); err == nil {
				t.Fatalf("%s without a client certificate succeeded", name)
			}
		}
	})
	t.Run("flags go together", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := run(ctx, []string{"-config", writeConfig(t, "t1"), "-client-auth", "envoy", "-extproc-tls-cert", p.serverCert,
			"-admin-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0", "-extproc-listen", "127.0.0.1:0",
			"-trampoline-listen", "127.0.0.1:0", "-xds-listen", ""}, func(string) string { return "" }, &testlog.Buffer{}, nil)
		if err == nil || err.Error() != "-extproc-tls-cert and -extproc-tls-key go together" {
			t.Fatalf("err %v", err)
		}
	})
}
