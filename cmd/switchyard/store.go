package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// storeFlags select and configure the shared store.
type storeFlags struct {
	kind       string // memory | redis
	mode       string // standalone | sentinel | cluster
	redisAddrs string // comma-separated
	masterName string // Sentinel
	username   string
	prefix     string
	db         int
	tls        tlsFlags
}

// tlsFlags configure TLS to Redis; any of them turns it on.
type tlsFlags struct {
	on         bool
	ca         string
	cert, key  string
	serverName string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kind, "store", "memory", "routing state and configuration store: memory (one replica) or redis (many replicas)")
	fs.StringVar(&f.mode, "redis-mode", "standalone", "Redis topology: standalone (one server), sentinel (-redis-addrs are the Sentinels, with -redis-master-name) or cluster (-redis-addrs are some of the nodes; one is enough)")
	fs.StringVar(&f.redisAddrs, "redis-addrs", "", "comma-separated Redis addresses (host:port)")
	fs.StringVar(&f.masterName, "redis-master-name", "", "Sentinel master name (-redis-mode sentinel)")
	fs.StringVar(&f.username, "redis-username", "", "Redis ACL user (the password is read from SWITCHYARD_REDIS_PASSWORD)")
	fs.StringVar(&f.prefix, "redis-prefix", redisstore.DefaultPrefix, "prefix of every Redis key (one per gateway fleet)")
	fs.IntVar(&f.db, "redis-db", 0, "Redis database (standalone and Sentinel only)")
	fs.BoolVar(&f.tls.on, "redis-tls", false, "connect to Redis over TLS (implied by the other -redis-tls-* flags)")
	fs.StringVar(&f.tls.ca, "redis-tls-ca", "", "PEM file of the CAs that sign the Redis server certificates (default: the system roots)")
	fs.StringVar(&f.tls.cert, "redis-tls-cert", "", "PEM client certificate for Redis (with -redis-tls-key)")
	fs.StringVar(&f.tls.key, "redis-tls-key", "", "PEM private key of -redis-tls-cert")
	fs.StringVar(&f.tls.serverName, "redis-tls-server-name", "", "name expected in the Redis server certificate (default: the host of each address)")
}

// redisEnv is what the environment carries for Redis: secrets never go on a command line.
type redisEnv struct {
	password         string // SWITCHYARD_REDIS_PASSWORD
	sentinelPassword string // SWITCHYARD_REDIS_SENTINEL_PASSWORD
}

// redisOptions turns the flags into client options. The topology is the -redis-mode, never
// guessed from the number of addresses: one address of a Cluster must still get the cluster
// client (whose reads are per-slot pipelines; a standalone client's MGET across slots fails
// with CROSSSLOT), and two addresses given by mistake to a standalone mode are an error, not
// a Cluster.
func redisOptions(f storeFlags, env redisEnv) (*redis.UniversalOptions, error) {
	var addrs []string
	for _, a := range strings.Split(f.redisAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("-store redis needs -redis-addrs")
	}
	o := &redis.UniversalOptions{Addrs: addrs, Username: f.username, Password: env.password}
	switch f.mode {
	case "standalone":
		if len(addrs) != 1 {
			return nil, fmt.Errorf("-redis-mode standalone takes one address, got %d (use -redis-mode cluster or sentinel for several)", len(addrs))
		}
		if f.masterName != "" {
			return nil, errors.New("-redis-master-name needs -redis-mode sentinel")
		}
		o.DB = f.db
	case "sentinel":
		if f.masterName == "" {
			return nil, errors.New("-redis-mode sentinel needs -redis-master-name")
		}
		o.MasterName = f.masterName
		o.DB = f.db
		o.SentinelUsername = f.username
		o.SentinelPassword = env.sentinelPassword
	case "cluster":
		if f.masterName != "" {
			return nil, errors.New("-redis-master-name needs -redis-mode sentinel")
		}
		if f.db != 0 {
			return nil, errors.New("-redis-db: a Redis Cluster has only database 0")
		}
		o.IsClusterMode = true
	default:
		return nil, fmt.Errorf("-redis-mode: unknown mode %q (standalone, sentinel or cluster)", f.mode)
	}
	tc, err := f.tls.config()
	if err != nil {
		return nil, err
	}
	o.TLSConfig = tc
	return o, nil
}

// config returns the TLS configuration, or nil for plain TCP.
func (t tlsFlags) config() (*tls.Config, error) {
	if !t.on && t.ca == "" && t.cert == "" && t.key == "" && t.serverName == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, fmt.Errorf("-redis-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-redis-tls-ca: no PEM certificate in %s", t.ca)
		}
		c.RootCAs = pool
	}
	if (t.cert == "") != (t.key == "") {
		return nil, errors.New("-redis-tls-cert and -redis-tls-key go together")
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, fmt.Errorf("-redis-tls-cert/-redis-tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// openedStore is the store in use plus what the binary reports about it.
type openedStore struct {
	store.Store
	name  string
	check func(context.Context) admin.Readiness
}

// openStore builds the store. With Redis it routes on the Resilient wrapper, so requests keep
// routing on local state while Redis is unreachable (docs/redis.md, "Degradation").
func openStore(f storeFlags, env redisEnv, p process) (*openedStore, error) {
	reg, log := p.reg, p.log
	switch f.kind {
	case "memory":
		return &openedStore{Store: memstore.New(), name: "memory"}, nil
	case "redis":
		opts, err := redisOptions(f, env)
		if err != nil {
			return nil, err
		}
		rdb := redisstore.NewClient(opts)
		remote, err := redisstore.New(rdb, redisstore.WithPrefix(f.prefix), redisstore.WithLogger(log))
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		res, err := redisstore.NewResilient(remote, redisstore.ResilientConfig{Clock: p.clock, Registerer: reg, Logger: log})
		if err != nil {
			_ = remote.Close()
			return nil, err
		}
		check := func(context.Context) admin.Readiness {
			st := res.Status()
			r := admin.Readiness{Name: "store", Ready: true, Detail: "redis " + f.mode}
			if st.Degraded {
				r.Degraded = true
				// Still ready: every replica degrades together when Redis goes away, and
				// failing readiness would take the whole fleet out of its load balancer while
				// it can still route on local state.
				r.Detail = fmt.Sprintf("redis unreachable since %s, routing on local state: %s", st.Since.UTC().Format("2006-01-02T15:04:05Z"), st.LastError)
			}
			return r
		}
		return &openedStore{Store: res, name: "redis", check: check}, nil
	default:
		return nil, fmt.Errorf("-store: unknown store %q (memory or redis)", f.kind)
	}
}
