package failure

import (
	"net/http"
	"strings"
	"testing"
)

// Keys Sanitize's shape rules do not recognise: an Azure-style 32-character alphanumeric
// key (not hex, under 40 characters) and a Hugging Face token.
const (
	azureStyleKey = "Zq7Kx2Lm9Np4Rt6Vw8Yb1Cd3Fg5Hj0Ks"
	hfKey         = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
)

func TestSanitizeMissesKeysWithoutAShape(t *testing.T) {
	// The reason for Secrets: by shape alone these keys pass.
	for _, k := range []string{azureStyleKey, hfKey} {
		if got := Sanitize("Access denied for key " + k + "."); !strings.Contains(got, k) {
			t.Fatalf("Sanitize redacted %q by shape (%q); pick a key it misses", k, got)
		}
	}
}

func TestSecretsSanitize(t *testing.T) {
	s := NewSecrets(azureStyleKey, hfKey, "short", "")
	cases := []struct{ name, in, want string }{
		{"Azure-style key", "Access denied due to invalid subscription key " + azureStyleKey + ".",
			"Access denied due to invalid subscription key [REDACTED]."},
		{"hf_ key inside a word", "tried x" + hfKey + "y, refused", "tried x[REDACTED]y, refused"},
		{"hf_ key twice", hfKey + " and " + hfKey, "[REDACTED] and [REDACTED]"},
		{"short values are not secrets", "a short message", "a short message"},
		{"clean message unchanged", "The server is overloaded.", "The server is overloaded."},
		{"after control characters", "key:\n" + azureStyleKey, "key: [REDACTED]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := s.Sanitize(c.in); got != c.want {
				t.Fatalf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (short and empty values dropped)", s.Len())
	}
}

func TestSecretsLongestFirst(t *testing.T) {
	// A secret that contains another is redacted whole, not around the shorter one.
	inner := "abcdefgh12345678"
	outer := "XYZ" + inner + "UVW"
	if got := NewSecrets(inner, outer).Redact("k=" + outer); got != "k=[REDACTED]" {
		t.Fatalf("Redact = %q", got)
	}
}

func TestSecretsWithLeavesTheBaseAlone(t *testing.T) {
	base := NewSecrets(azureStyleKey)
	req := base.With(hfKey)
	if got := base.Redact(hfKey); got != hfKey {
		t.Fatalf("base redacted the request's key: %q", got)
	}
	if got := req.Redact(azureStyleKey + " " + hfKey); got != "[REDACTED] [REDACTED]" {
		t.Fatalf("With: %q", got)
	}
	var none *Secrets
	if got := none.Sanitize("key " + hfKey); got != "key "+hfKey {
		t.Fatalf("nil Secrets changed the message: %q", got)
	}
}

// TestSecretsSanitizeLongMessage: a message past the search window is cut at white space, so
// a secret across the window's end leaves no prefix behind.
func TestSecretsSanitizeLongMessage(t *testing.T) {
	s := NewSecrets(azureStyleKey)
	for pad := redactWindow - len(azureStyleKey); pad <= redactWindow; pad++ {
		msg := strings.Repeat("[", pad-1) + " " + azureStyleKey + " tail"
		got := s.Sanitize(msg)
		if strings.Contains(got, azureStyleKey[:MinSecretBytes]) {
			t.Fatalf("pad %d: a prefix of the key survived", pad)
		}
		if len(got) > MaxMessageBytes {
			t.Fatalf("pad %d: %d bytes", pad, len(got))
		}
	}
}

func TestClassifyRedactsConfiguredSecrets(t *testing.T) {
	s := NewSecrets(azureStyleKey, hfKey)
	body := `{"error":{"code":"401","message":"Access denied due to invalid subscription key ` + azureStyleKey +
		`. Also tried ` + hfKey + `.","param":"` + hfKey + `","type":"t-` + azureStyleKey + `"}}`
	c := Classify(Outcome{Provider: ProviderAzureOpenAI, Status: http.StatusUnauthorized, Body: []byte(body), Secrets: s}, testNow())
	for _, f := range []string{c.Message, c.Param, c.Type, c.Code} {
		if strings.Contains(f, azureStyleKey) || strings.Contains(f, hfKey) {
			t.Fatalf("a configured key survived classification: %+v", c)
		}
	}
	if !strings.Contains(c.Message, "invalid subscription key [REDACTED]") {
		t.Fatalf("message %q", c.Message)
	}
	ev := `{"type":"error","error":{"type":"overloaded_error","message":"upstream said ` + hfKey + `"}}`
	c = Classify(Outcome{Provider: ProviderAnthropic, Status: 200, InBand: true, Event: "error", Body: []byte(ev), Secrets: s}, testNow())
	if strings.Contains(c.Message, hfKey) {
		t.Fatalf("in-band message %q", c.Message)
	}
}
