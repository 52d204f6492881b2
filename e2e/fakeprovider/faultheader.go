package fakeprovider

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is the request header that scripts a fault without Go code, for requests
// that travel through the gateway (which forwards headers it does not own).
//
// Syntax (see README.md for the full table):
//
//	x-fake-fault: <fault>[, <fault>…]
//	<fault>      = <item>[; <item>…]
//	<item>       = <key>=<value> | <error kind> | <end name>
//
// Values are percent-decoded, so ';' ',' '=' can be sent as %3B %2C %3D. Durations use
// Go syntax ("250ms", "2s"). Several faults may be sent as a comma list or as repeated
// headers (proxies may merge those into one comma list); the first one that matches the
// request applies. Example:
//
//	x-fake-fault: server=primary; error=rate_limit; retry-after=1; times=1
const FaultHeader = "x-fake-fault"

// HeaderFault is one fault parsed from FaultHeader.
type HeaderFault struct {
	Fault
	// Server, when set, restricts the fault to the fake whose Options.Name equals it.
	Server string
	// Spec is the fault's text as sent. With times=N the fake counts uses per Spec, so the
	// same header on a retried request stops applying after N uses.
	Spec string
	// Counted reports whether times= was given; otherwise the fault applies to every
	// request carrying the header.
	Counted bool
}

// ParseFaultHeader parses the values of FaultHeader (each value may hold a comma list).
func ParseFaultHeader(values ...string) ([]HeaderFault, error) {
	var out []HeaderFault
	for _, v := range values {
		for spec := range strings.SplitSeq(v, ",") {
			spec = strings.TrimSpace(spec)
			if spec == "" {
				continue
			}
			hf, err := parseOneFault(spec)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", FaultHeader, spec, err)
			}
			out = append(out, hf)
		}
	}
	return out, nil
}

func parseOneFault(spec string) (HeaderFault, error) {
	hf := HeaderFault{Spec: spec}
	f := &hf.Fault
	for item := range strings.SplitSeq(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, raw, hasValue := strings.Cut(item, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !hasValue {
			if err := parseBare(f, key); err != nil {
				return hf, err
			}
			continue
		}
		val, err := url.PathUnescape(strings.TrimSpace(raw))
		if err != nil {
			return hf, fmt.Errorf("%s: %w", key, err)
		}
		if err := parseItem(&hf, key, val); err != nil {
			return hf, fmt.Errorf("%s: %w", key, err)
		}
	}
	return hf, nil
}

// parseBare accepts an error kind, an end name or tiny-writes on its own ("overloaded",
// "reset").
func parseBare(f *Fault, word string) error {
	if word == "tiny-writes" {
		f.TinyWrites = true
		return nil
	}
	if k, ok := parseKind(word); ok {
		f.Error = k
		return nil
	}
	if e, ok := parseEnd(word); ok {
		f.End = e
		return nil
	}
	return fmt.Errorf("unknown item %q", word)
}

func parseItem(hf *HeaderFault, key, val string) error {
	f := &hf.Fault
	var err error
	switch key {
	case "server":
		hf.Server = val
	case "path":
		f.Path = val
	case "model":
		f.Model = val
	case "times":
		hf.Counted = true
		f.Times, err = parsePositive(val)
	case "error", "kind":
		k, ok := parseKind(val)
		if !ok {
			return fmt.Errorf("unknown error kind %q", val)
		}
		f.Error = k
	case "status":
		f.Status, err = strconv.Atoi(val)
		if err == nil && (f.Status < 100 || f.Status > 999) {
			err = errors.New("status out of range")
		}
	case "type":
		f.Type = val
	case "code":
		f.Code = val
	case "message":
		f.Message = val
	case "param":
		f.Param = val
	case "body":
		f.Body = val
	case "retry-after":
		f.RetryAfter = val
	case "retry-after-ms":
		f.RetryAfterMS = val
	case "header":
		name, hv, ok := strings.Cut(val, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return errors.New("want Name:Value")
		}
		if f.Header == nil {
			f.Header = http.Header{}
		}
		f.Header.Add(strings.TrimSpace(name), strings.TrimSpace(hv))
	case "header-delay":
		f.HeaderDelay, err = time.ParseDuration(val)
	case "first-byte":
		f.FirstByteDelay, err = time.ParseDuration(val)
	case "stall":
		f.Stall, err = time.ParseDuration(val)
	case "stall-after":
		f.StallAfter, err = parseCount(val)
	case "keepalive":
		f.Keepalive, err = time.ParseDuration(val)
	case "end":
		e, ok := parseEnd(val)
		if !ok {
			return fmt.Errorf("unknown end %q", val)
		}
		f.End = e
	case "after":
		f.EndAfter, err = parseCount(val)
	case "usage":
		switch val {
		case "on":
			f.Usage = UsageOn
		case "off":
			f.Usage = UsageOff
		default:
			return fmt.Errorf("want on or off, got %q", val)
		}
	case "text":
		content(f).Text = val
	case "chunks":
		content(f).Chunks, err = parsePositive(val)
	case "prompt-tokens":
		content(f).PromptTokens, err = parseCount(val)
	case "cached-tokens":
		content(f).CachedTokens, err = parseCount(val)
	case "reasoning-tokens":
		content(f).ReasoningTokens, err = parseCount(val)
	default:
		return errors.New("unknown key")
	}
	if err != nil {
		return fmt.Errorf("%q: %w", val, err)
	}
	if f.HeaderDelay < 0 || f.FirstByteDelay < 0 || f.Stall < 0 || f.Keepalive < 0 {
		return errors.New("negative duration")
	}
	return nil
}

func content(f *Fault) *Content {
	if f.Content == nil {
		f.Content = &Content{}
	}
	return f.Content
}

func parseKind(s string) (ErrorKind, bool) {
	for _, k := range errorKinds() {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

func parseEnd(s string) (End, bool) {
	for e := EndNormal; e <= lastEnd; e++ {
		if e.String() == s {
			return e, true
		}
	}
	return 0, false
}

func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("not a count: %w", err)
	}
	if n < 0 {
		return 0, errors.New("negative count")
	}
	return n, nil
}

func parsePositive(s string) (int, error) {
	n, err := parseCount(s)
	if err == nil && n == 0 {
		err = errors.New("must be at least 1")
	}
	return n, err
}
