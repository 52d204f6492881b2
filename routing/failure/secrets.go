package failure

import (
	"slices"
	"strings"
)

// MinSecretBytes is the shortest credential redacted literally. A shorter one would match
// ordinary words of provider messages ("error", "model") and garble them; it is guessable
// anyway, and the shape rules of Sanitize still apply to it. The extproc package logs the
// deployments whose keys are shorter, once per configuration version.
const MinSecretBytes = 8

// redactWindow bounds the message text searched for secrets. Sanitize keeps at most
// MaxMessageBytes; a message whose first redactWindow bytes do not fill that is junk (an
// echoed input), so cutting it costs nothing and keeps the search linear in a small bound
// however many secrets there are.
const redactWindow = 16 * MaxMessageBytes

// Secrets is a set of credentials that must never reach a client or a log in provider text:
// every deployment's API key (an Azure key, "hf_…" or a 32-character alphanumeric key has no
// shape Sanitize recognises) and the client's own key. It is built once per configuration
// version; With adds a request's client key. A nil *Secrets holds nothing.
type Secrets struct {
	// lits is longest first, so that a secret containing another is redacted whole.
	lits []string
}

// NewSecrets is the set of values, without duplicates and values shorter than
// MinSecretBytes.
func NewSecrets(values ...string) *Secrets {
	return (*Secrets)(nil).With(values...)
}

// With is s plus values; s itself is unchanged.
func (s *Secrets) With(values ...string) *Secrets {
	var lits []string
	if s != nil {
		lits = slices.Clone(s.lits)
	}
	for _, v := range values {
		if len(v) >= MinSecretBytes && !slices.Contains(lits, v) {
			lits = append(lits, v)
		}
	}
	slices.SortStableFunc(lits, func(a, b string) int { return len(b) - len(a) })
	return &Secrets{lits: lits}
}

// Len is the number of secrets in s.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	return len(s.lits)
}

// Redact replaces every occurrence of a secret of s in text by "[REDACTED]". Text without
// one is returned as is, without allocating.
func (s *Secrets) Redact(text string) string {
	if s == nil {
		return text
	}
	for _, lit := range s.lits {
		if strings.Contains(text, lit) {
			text = strings.ReplaceAll(text, lit, redacted)
		}
	}
	return text
}

// Sanitize is Sanitize(msg) with the secrets of s redacted first, literally: before the
// shape rules, which could otherwise split a secret and leave part of it, and before
// Sanitize's cut. Only the first redactWindow bytes of msg are read, cut back to white space
// so that no secret is split at the window's end.
func (s *Secrets) Sanitize(msg string) string {
	if s.Len() == 0 {
		return Sanitize(msg)
	}
	if len(msg) > redactWindow {
		msg = msg[:redactWindow]
		if i := strings.LastIndexAny(msg, " \t\r\n"); i >= 0 {
			msg = msg[:i]
		} else {
			msg = ""
		}
	}
	return Sanitize(s.Redact(msg))
}
