package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// checkDeployment holds a deployment's rules the schema cannot say: a base URL Envoy can
// turn into a cluster (a bad one used to stop every xDS publication, behaviour §11.1), and
// a key that can be sent as a header value.
func checkDeployment(ve *ValidationError, prefix string, d *configv1.Deployment) {
	if raw := d.GetBaseUrl(); raw != "" { // empty: the schema's min_len reports it
		if err := CheckBaseURL(raw); err != nil {
			ve.add(join(prefix, "baseUrl"), "%v", err)
		}
	}
	if i := strings.IndexFunc(d.GetApiKey(), isControl); i >= 0 {
		// Never the key itself, only where it breaks: a CR/LF or other control character
		// cannot be a header value, and Envoy would send the request without it.
		ve.add(join(prefix, "apiKey"), "contains a control character at byte %d; a key must be printable", i)
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// CheckBaseURL accepts what xds turns into a provider endpoint: http or https, a host, a
// port in 1-65535 when given, no userinfo (credentials go in apiKey) and no fragment.
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, which may hold a credential: its cause alone.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: must be http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q: want 1-65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("empty port")
	}
	if u.User != nil {
		return fmt.Errorf("userinfo is not allowed; put the credential in apiKey")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("fragment is not allowed")
	}
	return nil
}
