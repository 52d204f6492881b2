package store

import (
	"context"
	"errors"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// ConfigStore persists the configuration and tells every replica when it changed
// (behaviour §11.2). It stores what it is given: validation and the PUT merge rules live in
// routing/config, before anything reaches a store.
//
// Every write bumps a monotonically increasing version. Secrets (deployment API keys) are
// kept apart from the rest (behaviour §11.3): LoadConfig returns deployments with apiKey cleared
// and the keys in ConfigSnapshot.Secrets, so a read API that serialises the config cannot
// leak them by accident.
type ConfigStore interface {
	// LoadConfig returns the whole configuration and its version.
	LoadConfig(ctx context.Context) (ConfigSnapshot, error)
	// ConfigVersion returns the current version without loading the configuration.
	ConfigVersion(ctx context.Context) (uint64, error)
	// ReplaceConfig replaces everything (used to seed a store from a config file). Deployments
	// with an empty apiKey keep the secret already stored for their id.
	ReplaceConfig(ctx context.Context, cfg *configv1.Config) (uint64, error)
	// ReplaceConfigIf is ReplaceConfig applied only while the stored version is still
	// expected, atomically (a compare-and-swap on the version): the admin API reads the
	// configuration, changes it, validates the whole result and writes it back with this, so
	// two operators, or two replicas, can never overwrite each other's change unseen. It
	// returns ErrVersionConflict, changing nothing, when another write got in first.
	ReplaceConfigIf(ctx context.Context, expected uint64, cfg *configv1.Config) (uint64, error)
	// RestoreConfig puts back a configuration the store lost: it replaces everything with cfg
	// at exactly version, atomically, only while the stored version is below it (absent counts
	// as 0). A replica calls it with the configuration it serves when the store's version went
	// backwards (a Redis restarted empty, a failover to a stale replica), so the fleet keeps
	// that configuration and the next write's version follows it. Of replicas racing to
	// restore, the one with the highest version wins and the others change nothing. It
	// returns the stored version afterwards and whether this call wrote it.
	RestoreConfig(ctx context.Context, version uint64, cfg *configv1.Config) (stored uint64, restored bool, err error)
	// WatchConfig delivers versions as they change (on every replica), coalescing bursts: a
	// receiver may see only the latest version. The channel closes when ctx is done.
	// Implementations must also catch up on versions whose notification was lost.
	WatchConfig(ctx context.Context) <-chan uint64
}

// ConfigSnapshot is a loaded configuration.
type ConfigSnapshot struct {
	Version uint64
	// Config holds deployments with apiKey cleared.
	Config *configv1.Config
	// Secrets maps deployment id to API key.
	Secrets map[string]string
}

// ErrNotFound is returned when deleting something that does not exist.
var ErrNotFound = errors.New("not found")

// ErrVersionConflict is returned by ReplaceConfigIf when the stored version is no longer the
// expected one.
var ErrVersionConflict = errors.New("configuration version conflict")
