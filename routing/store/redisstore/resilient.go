package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/clock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// Resilient is the store.Store the gateway routes on in multi-replica mode: the Redis store
// while Redis answers, a process-local store while it does not. No routing call fails or
// waits on an unreachable Redis for longer than one operation timeout:
//
//   - The first failed or timed-out Redis call switches the wrapper to degraded mode; that
//     call and every routing call after it is served by the local store at memory speed.
//   - A background check PINGs Redis after a backoff (doubling up to MaxBackoff, timed by
//     the injected Clock) and switches back when Redis answers.
//   - Attempts that started in Redis but finish during the outage are finished locally and
//     their in-flight releases queued; the queue is replayed before switching back, so no
//     in-flight entry lingers in Redis until its expiry.
//   - Config reads fall back to the last snapshot loaded from Redis; config writes are not
//     served locally (replicas would diverge) and fail with store.ErrUnavailable. On
//     recovery the config version is re-read and watchers are notified if it moved.
//
// Operators see it in Status (readiness), Prometheus metrics and a rate-limited warning.
type Resilient struct {
	remote *Store
	local  store.Store
	cfg    ResilientConfig
	m      resilientMetrics

	degraded atomic.Bool // the fast path: read on every call without the lock

	mu            sync.Mutex
	status        Status
	backoff       time.Duration
	queue         []release // in-flight releases to replay on recovery
	localAttempts map[string]localAttempt
	sweepAt       int
	snapshot      *store.ConfigSnapshot // last configuration loaded from Redis
	notified      uint64                // last version delivered to watchers
	lastWarn      time.Time
	localOps      int // served locally since the last warning

	kick      chan struct{} // wakes the recovery loop when the wrapper degrades
	watchers  store.Broadcaster
	watchOnce sync.Once
	bg        context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var _ store.Store = (*Resilient)(nil)

// ResilientConfig configures a Resilient. The zero value works.
type ResilientConfig struct {
	// Local serves routing while Redis is unreachable; default a new memstore.
	Local store.Store
	// Clock times backoff waits, status timestamps and log rate limiting (routing state never
	// uses it: stores take `now` from the caller); the system clock when nil.
	Clock clock.Clock
	// Registerer receives the wrapper's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MinBackoff is the wait before the first check of an unreachable Redis (default
	// 250 ms); each failed check doubles it up to MaxBackoff (default 5 s).
	MinBackoff, MaxBackoff time.Duration
	// LogInterval is the least time between two warnings of one outage (default 30 s).
	LogInterval time.Duration
	// MaxQueuedReleases bounds the replay queue (default 100000). Releases beyond it are
	// dropped and counted; their entries still stop counting at their own expiry.
	MaxQueuedReleases int
}

// Status is the wrapper's health, for readiness endpoints. It never carries a secret:
// LastError is a Redis client error (address, timeout, refusal), not configuration.
type Status struct {
	// Degraded: routing runs on process-local state because Redis is unreachable.
	Degraded bool
	// Since is when the current outage began (zero when not degraded).
	Since time.Time
	// LastError is the latest Redis failure seen (kept after recovery for diagnosis).
	LastError string
}

// localAttempt is an attempt started on the local store.
type localAttempt struct {
	expires time.Time
	// maybeRemote: the Redis start failed in a way that may have run the script (a timeout
	// after sending), so the release must reach Redis as well.
	maybeRemote bool
}

// NewResilient wraps remote. The wrapper owns remote and the local store: Close closes both.
func NewResilient(remote *Store, cfg ResilientConfig) (*Resilient, error) {
	if cfg.Local == nil {
		cfg.Local = memstore.New()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 250 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 30 * time.Second
	}
	if cfg.MaxQueuedReleases <= 0 {
		cfg.MaxQueuedReleases = 100000
	}
	m, err := newResilientMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	r := &Resilient{
		remote:        remote,
		local:         cfg.Local,
		cfg:           cfg,
		m:             m,
		localAttempts: make(map[string]localAttempt),
		sweepAt:       1024,
		kick:          make(chan struct{}, 1),
		bg:            bg,
		stop:          stop,
	}
	r.wg.Add(1)
	go r.recoveryLoop()
	return r, nil
}

// Status reports whether routing runs on local state, since when and why.
func (r *Resilient) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Close stops the background work, makes a last attempt to replay queued releases, and
// closes both stores.
func (r *Resilient) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.stop()
		r.wg.Wait()
		r.mu.Lock()
		q := r.queue
		r.queue = nil
		r.mu.Unlock()
		if len(q) > 0 {
			if rerr := r.remote.releaseAttempts(context.Background(), q); rerr != nil {
				r.cfg.Logger.Warn("in-flight releases not replayed at close; entries expire on their own",
					"count", len(q), "err", rerr)
			}
		}
		r.watchers.Close()
		err = errors.Join(r.remote.Close(), r.local.Close())
	})
	return err
}

// ReadStates implements store.States.
func (r *Resilient) ReadStates(ctx context.Context, now time.Time, refs []store.DeploymentRef, out []store.DeploymentState) error {
	if !r.degraded.Load() {
		err := r.remote.ReadStates(ctx, now, refs, out)
		if err == nil {
			return nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opReadStates)
	return r.local.ReadStates(ctx, now, refs, out)
}

// StartAttempt implements store.Attempts.
func (r *Resilient) StartAttempt(ctx context.Context, a store.AttemptStart) error {
	maybeRemote := false
	if !r.degraded.Load() {
		err := r.remote.StartAttempt(ctx, a)
		if err == nil {
			return nil
		}
		r.fail(ctx, err)
		// The script may have run before the failure surfaced (a lost reply): release the
		// entry in Redis too when the attempt ends.
		maybeRemote = true
	}
	r.servedLocally(opStartAttempt)
	r.trackLocal(a, maybeRemote)
	return r.local.StartAttempt(ctx, a)
}

// FinishAttempt implements store.Attempts. The outcome goes where the state is served now;
// an attempt that started elsewhere is released there too (locally at once, in Redis by the
// replay queue).
func (r *Resilient) FinishAttempt(ctx context.Context, f store.AttemptFinish) (store.Transition, error) {
	la, isLocal := r.untrackLocal(f.AttemptID)
	if !r.degraded.Load() {
		t, err := r.remote.FinishAttempt(ctx, f)
		if err == nil {
			if isLocal {
				r.releaseLocal(ctx, f)
			}
			return t, nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opFinishAttempt)
	t, err := r.local.FinishAttempt(ctx, f)
	if !isLocal || la.maybeRemote {
		r.queueRelease(ctx, release{deploymentID: f.DeploymentID, attemptID: f.AttemptID, now: f.Now})
	}
	return t, err
}

// Reserve implements store.Attempts. During an outage the limits hold per replica only:
// each one counts its own reservations locally.
func (r *Resilient) Reserve(ctx context.Context, res store.Reservation) (bool, error) {
	if !r.degraded.Load() {
		ok, err := r.remote.Reserve(ctx, res)
		if err == nil {
			return ok, nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opReserve)
	return r.local.Reserve(ctx, res)
}

// Unreserve implements store.Attempts.
func (r *Resilient) Unreserve(ctx context.Context, res store.Reservation) error {
	if !r.degraded.Load() {
		err := r.remote.Unreserve(ctx, res)
		if err == nil {
			return nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opUnreserve)
	return r.local.Unreserve(ctx, res)
}

// AcquireProbe implements store.Probes.
func (r *Resilient) AcquireProbe(ctx context.Context, deploymentID, requestID string, now time.Time, ttl time.Duration) (bool, error) {
	if !r.degraded.Load() {
		ok, err := r.remote.AcquireProbe(ctx, deploymentID, requestID, now, ttl)
		if err == nil {
			return ok, nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opAcquireProbe)
	return r.local.AcquireProbe(ctx, deploymentID, requestID, now, ttl)
}

// LoadConfig implements store.ConfigStore: Redis, else the last snapshot loaded from it.
func (r *Resilient) LoadConfig(ctx context.Context) (store.ConfigSnapshot, error) {
	if !r.degraded.Load() {
		snap, err := r.remote.LoadConfig(ctx)
		if err == nil {
			r.mu.Lock()
			r.snapshot = cloneSnapshot(&snap)
			r.mu.Unlock()
			return snap, nil
		}
		r.fail(ctx, err)
		if !errors.Is(err, store.ErrUnavailable) {
			return store.ConfigSnapshot{}, err // a bad record, not an outage: say so
		}
	}
	r.servedLocally(opLoadConfig)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapshot == nil {
		return store.ConfigSnapshot{}, fmt.Errorf("redisstore: load config: Redis unreachable and no snapshot loaded yet: %w", store.ErrUnavailable)
	}
	return *cloneSnapshot(r.snapshot), nil
}

// ConfigVersion implements store.ConfigStore: Redis, else the last snapshot's version.
func (r *Resilient) ConfigVersion(ctx context.Context) (uint64, error) {
	if !r.degraded.Load() {
		v, err := r.remote.ConfigVersion(ctx)
		if err == nil {
			return v, nil
		}
		r.fail(ctx, err)
	}
	r.servedLocally(opConfigVersion)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapshot == nil {
		return 0, fmt.Errorf("redisstore: config version: Redis unreachable and no snapshot loaded yet: %w", store.ErrUnavailable)
	}
	return r.snapshot.Version, nil
}

// ReplaceConfig implements store.ConfigStore (Redis only).
func (r *Resilient) ReplaceConfig(ctx context.Context, cfg *configv1.Config) (uint64, error) {
	return r.write(ctx, func() (uint64, error) { return r.remote.ReplaceConfig(ctx, cfg) })
}

// RestoreConfig implements store.ConfigStore (Redis only: it puts back what Redis lost).
func (r *Resilient) RestoreConfig(ctx context.Context, version uint64, cfg *configv1.Config) (uint64, bool, error) {
	v, restored, err := r.remote.RestoreConfig(ctx, version, cfg)
	if err != nil {
		r.fail(ctx, err)
	}
	return v, restored, err
}

// CreateClientKey implements store.ClientKeys (Redis only: keys have no local copy; the
// route role's verifier caches the keys it verified, admin.Verifier).
func (r *Resilient) CreateClientKey(ctx context.Context, k store.ClientKey) error {
	return r.remote.CreateClientKey(ctx, k)
}

// ClientKey implements store.ClientKeys (Redis only). While degraded it fails at once with
// store.ErrUnavailable instead of waiting one timeout per call for an unreachable Redis: it
// is on the request path, and the verifier serves the keys it knows from its cache. A
// failure degrades the wrapper like a routing call's.
func (r *Resilient) ClientKey(ctx context.Context, id string) (store.ClientKey, error) {
	if r.degraded.Load() {
		return store.ClientKey{}, fmt.Errorf("redisstore: client key: Redis unreachable: %w", store.ErrUnavailable)
	}
	k, err := r.remote.ClientKey(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.fail(ctx, err)
	}
	return k, err
}

// WatchRevocations implements store.ClientKeys (Redis's announcements).
func (r *Resilient) WatchRevocations(ctx context.Context) <-chan string {
	return r.remote.WatchRevocations(ctx)
}

// ListClientKeys implements store.ClientKeys (Redis only).
func (r *Resilient) ListClientKeys(ctx context.Context) ([]store.ClientKey, error) {
	return r.remote.ListClientKeys(ctx)
}

// DeleteClientKey implements store.ClientKeys (Redis only).
func (r *Resilient) DeleteClientKey(ctx context.Context, id string) error {
	return r.remote.DeleteClientKey(ctx, id)
}

// ReplaceConfigIf implements store.ConfigStore (Redis only). A conflict is an answer, not an
// outage.
func (r *Resilient) ReplaceConfigIf(ctx context.Context, expected uint64, cfg *configv1.Config) (uint64, error) {
	return r.write(ctx, func() (uint64, error) { return r.remote.ReplaceConfigIf(ctx, expected, cfg) })
}

// write sends a config change to Redis even while degraded: admin writes are rare, may wait
// for one timeout, and succeed as soon as Redis is back.
func (r *Resilient) write(ctx context.Context, fn func() (uint64, error)) (uint64, error) {
	v, err := fn()
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrVersionConflict) {
		r.fail(ctx, err)
	}
	return v, err
}

// WatchConfig implements store.ConfigStore: the Redis store's notifications (pub/sub and
// polling), plus the version re-read when Redis comes back.
func (r *Resilient) WatchConfig(ctx context.Context) <-chan uint64 {
	r.watchOnce.Do(func() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for v := range r.remote.WatchConfig(r.bg) {
				r.notify(v)
			}
		}()
	})
	return r.watchers.Add(ctx)
}

// notify delivers v to watchers unless it is not newer than the last delivered version.
func (r *Resilient) notify(v uint64) {
	r.mu.Lock()
	if v <= r.notified {
		r.mu.Unlock()
		return
	}
	r.notified = v
	// Notify under the lock: two notifiers (the forwarder and recovery) must not deliver
	// out of order, or a slow receiver could be left with the older version.
	r.watchers.Notify(v)
	r.mu.Unlock()
}

func cloneSnapshot(s *store.ConfigSnapshot) *store.ConfigSnapshot {
	c := &store.ConfigSnapshot{Version: s.Version, Secrets: make(map[string]string, len(s.Secrets))}
	if s.Config != nil {
		c.Config = proto.Clone(s.Config).(*configv1.Config)
	}
	for k, v := range s.Secrets {
		c.Secrets[k] = v
	}
	return c
}
