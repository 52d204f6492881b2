package extproc

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// configSecrets holds the credentials of one configuration snapshot as a failure.Secrets, so
// that a provider message echoing any deployment's key is redacted literally whatever the
// key looks like (behaviour §7.4: the client gets the provider's sanitised message). Built
// once per snapshot, on the first failure that needs it; a new snapshot builds a new set.
type configSecrets struct {
	mu   sync.Mutex
	snap *config.Snapshot
	set  *failure.Secrets
}

func (c *configSecrets) get(snap *config.Snapshot, log *slog.Logger) *failure.Secrets {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == snap && c.set != nil {
		return c.set
	}
	keys := make([]string, 0, len(snap.Deployments))
	var short []string
	for id, d := range snap.Deployments {
		keys = append(keys, d.APIKey)
		if d.APIKey != "" && len(d.APIKey) < failure.MinSecretBytes {
			short = append(short, id)
		}
	}
	if len(short) > 0 {
		// Once per configuration version: such a key would match ordinary words.
		log.Warn("deployment API keys shorter than the redaction minimum are not redacted literally from provider messages",
			"deployments", short, "min_bytes", failure.MinSecretBytes, "version", snap.Version)
	}
	c.snap, c.set = snap, failure.NewSecrets(keys...)
	return c.set
}

// clientSecrets are the client's own credentials as the route role saved them in the state:
// the token of authorization ("Bearer <key>"), x-api-key and api-key.
func clientSecrets(st *attemptstate.State) []string {
	var out []string
	for _, name := range [...]string{"authorization", "x-api-key", "api-key"} {
		v, present, _ := st.SavedHeader(name)
		if !present {
			continue
		}
		s := strings.TrimSpace(string(v))
		if i := strings.LastIndexByte(s, ' '); i >= 0 {
			s = s[i+1:] // the credentials after the scheme
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
