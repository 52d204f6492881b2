package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// grpcTLSFlags serve a gRPC listener over TLS, and with a client CA over mutual TLS (Envoy's
// grpc_service then needs a transport socket with a client certificate).
type grpcTLSFlags struct {
	name                string // the flags' prefix: extproc or xds
	cert, key, clientCA string
}

func (f *grpcTLSFlags) register(fs *flag.FlagSet, name, what string) {
	f.name = name
	fs.StringVar(&f.cert, name+"-tls-cert", "", "PEM certificate of the "+what+" (with -"+name+"-tls-key): serve it over TLS")
	fs.StringVar(&f.key, name+"-tls-key", "", "PEM private key of -"+name+"-tls-cert")
	fs.StringVar(&f.clientCA, name+"-tls-client-ca", "", "PEM file of the CAs whose client certificates the "+what+" requires (mutual TLS)")
}

// serverOptions are the listener's gRPC credentials: none for plaintext.
func (f grpcTLSFlags) serverOptions() ([]grpc.ServerOption, error) {
	p := "-" + f.name + "-tls"
	if f.cert == "" && f.key == "" {
		if f.clientCA != "" {
			return nil, errors.New(p + "-client-ca needs " + p + "-cert and " + p + "-key")
		}
		return nil, nil
	}
	if f.cert == "" || f.key == "" {
		return nil, errors.New(p + "-cert and " + p + "-key go together")
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("%s-cert/%s-key: %w", p, p, err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if f.clientCA != "" {
		pem, err := os.ReadFile(f.clientCA)
		if err != nil {
			return nil, fmt.Errorf("%s-client-ca: %w", p, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s-client-ca: no PEM certificate in %s", p, f.clientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c))}, nil
}
