package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Store is a store.Store on Redis, for replicas that share routing state. It is safe for
// concurrent use. Build it with New; Close releases it and the client.
type Store struct {
	rdb     redis.UniversalClient
	keys    keyspace
	scripts scripts
	opts    options

	// The routing read path (states.go) reuses its buffers and key strings.
	stateArgs, capacityArgs keyCache
	reads                   sync.Pool // *readScratch
	pipes                   sync.Pool // redis.Pipeliner, reusable once Exec returned
	// mget: every candidate is read with one MGET. Only a single-node client (standalone or
	// Sentinel) can: on a Cluster the keys span slots, so the read is a pipeline of GETs.
	mget bool

	watchers   store.Broadcaster
	watchOnce  sync.Once
	revoked    store.Fanout // client key revocations (clientkeys.go)
	revokeOnce sync.Once
	bg         context.Context // cancelled by Close: stops the config and revocation watchers
	stop       context.CancelFunc
	wg         sync.WaitGroup
	closeOnce  sync.Once
}

var _ store.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*options)

type options struct {
	prefix       string
	opTimeout    time.Duration
	cfgTimeout   time.Duration
	pollInterval time.Duration
	logger       *slog.Logger
	publish      bool
	pipelined    bool // read with pipelined GETs even where MGET works (tests)
}

// Default values of the options.
const (
	DefaultPrefix             = "sy:"
	DefaultOpTimeout          = 250 * time.Millisecond
	DefaultConfigTimeout      = 2 * time.Second
	DefaultConfigPollInterval = 2 * time.Second
)

// Garbage-collection horizons. They only bound how long idle keys occupy memory; no state
// is derived from them (see docs/redis.md for why each is safe).
const (
	// circuitGrace: a circuit record outlives its last relevant timestamp by a day, so a
	// half-open circuit nobody probes is forgotten (read as closed) only after a long silence.
	circuitGrace = 24 * time.Hour
	// stateTTL: every write keeps a deployment's state record at least a day (and never
	// shortens it): metrics of a deployment without any attempt for a day are dropped; its
	// health window and minute counters are long over by then, only the EWMAs are lost.
	stateTTL = 24 * time.Hour
	// inflightGrace: the in-flight set outlives its latest entry's expiry by a minute. Entries
	// stop counting at their own expiry; this only removes the empty shell.
	inflightGrace = time.Minute
	// capacityGrace and dedupeGrace cover clock skew between replicas.
	capacityGrace = time.Minute
	dedupeGrace   = time.Minute
)

// WithPrefix sets the prefix of every key and channel (default "sy:"), so several gateways
// or tests can share one Redis. It must not contain braces (they would move the hash tag).
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithOpTimeout bounds each routing operation (one pipeline), default 250 ms. Redis answers
// in well under a millisecond; a longer wait means trouble, and Resilient then routes on
// local state rather than make requests wait.
func WithOpTimeout(d time.Duration) Option { return func(o *options) { o.opTimeout = d } }

// WithConfigPollInterval sets how often the config version is polled to catch changes whose
// pub/sub notification was lost (default 2 s).
func WithConfigPollInterval(d time.Duration) Option {
	return func(o *options) { o.pollInterval = d }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New returns a Store on rdb and takes ownership of it: Close closes the client. rdb may be
// a standalone, Sentinel (failover) or Cluster client; see NewClient for the timeouts the
// store relies on.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	o := options{
		prefix:       DefaultPrefix,
		opTimeout:    DefaultOpTimeout,
		cfgTimeout:   DefaultConfigTimeout,
		pollInterval: DefaultConfigPollInterval,
		publish:      true,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if !validPrefix(o.prefix) {
		return nil, fmt.Errorf("redisstore: key prefix %q must not contain braces", o.prefix)
	}
	if o.opTimeout <= 0 || o.cfgTimeout <= 0 || o.pollInterval <= 0 {
		return nil, errors.New("redisstore: timeouts and the poll interval must be positive")
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	sc, err := loadScripts()
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	s := &Store{rdb: rdb, keys: keyspace{prefix: o.prefix}, scripts: sc, opts: o, bg: bg, stop: stop}
	s.stateArgs.build = s.keys.state
	s.capacityArgs.build = s.keys.capacity
	s.reads.New = func() any { return new(readScratch) }
	s.pipes.New = func() any { return rdb.Pipeline() }
	_, single := rdb.(*redis.Client)
	s.mget = single && !o.pipelined
	return s, nil
}

// NewClient returns a UniversalClient for o with the bounds a routing store needs filled in
// where o leaves them zero: context deadlines honoured on the socket (ContextTimeoutEnabled),
// short dial/read/write/pool timeouts, one dial attempt and no command retries. One address makes a
// standalone client, MasterName a Sentinel client, several addresses (or IsClusterMode) a
// Cluster client. o is not modified.
func NewClient(o *redis.UniversalOptions) redis.UniversalClient {
	c := *o
	// A copy of the addresses: go-redis's cluster client appends discovered nodes to the
	// slice it is given, which would write into the caller's array (and race between
	// clients built from one slice with spare capacity).
	c.Addrs = slices.Clone(o.Addrs)
	c.ContextTimeoutEnabled = true
	setDefault(&c.DialTimeout, time.Second)
	setDefault(&c.ReadTimeout, 500*time.Millisecond)
	setDefault(&c.WriteTimeout, 500*time.Millisecond)
	setDefault(&c.PoolTimeout, 500*time.Millisecond)
	if c.DialerRetries == 0 {
		// Resilient retries by itself; a dial retry loop would only hold requests longer.
		c.DialerRetries = 1
	}
	if c.MaxRetries == 0 {
		// No command retries: a script whose reply was lost may have run, and running it
		// again would count its outcome twice. A failed call degrades Resilient instead.
		c.MaxRetries = -1
	}
	return redis.NewUniversalClient(&c)
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d == 0 {
		*d = v
	}
}

// Close stops the config watcher, closes watch channels and the client.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		s.watchers.Close()
		s.revoked.Close()
		if cerr := s.rdb.Close(); cerr != nil {
			err = fmt.Errorf("redisstore: close client: %w", cerr)
		}
	})
	return err
}

// Ping checks that Redis answers, within the operation timeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.opTimeout)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Client returns the underlying client (for health checks and diagnostics).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.opTimeout)
}

func (s *Store) cfgCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.cfgTimeout)
}

// unavailable wraps a failure to talk to Redis as store.ErrUnavailable, so callers can
// degrade instead of failing requests.
func unavailable(op string, err error) error {
	return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
}
