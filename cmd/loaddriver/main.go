// Command loaddriver starts a whole gateway on loopback (fake providers, a switchyard
// replica with its memory store, envoysim playing Envoy from
// envoy/static-clusters.yaml.tmpl) and drives many concurrent chat streams through it with
// openai-go, then prints requests, errors by kind, latency and time-to-first-token
// percentiles, in-flight attempts per deployment afterwards (must be 0) and goroutines
// before and after. It talks to 127.0.0.1 only. `make load` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/e2e/gatewaytest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loaddriver:", err)
		os.Exit(1)
	}
}

func run() error {
	streams := flag.Int("streams", 2000, "concurrent streams")
	requests := flag.Int("requests", 0, "streams in all (0: 2 × -streams)")
	duration := flag.Duration("duration", 3*time.Minute, "bound on the whole run")
	deployments := flag.Int("deployments", 2, "OpenAI deployments behind the public model")
	chunks := flag.Int("chunks", 20, "content chunks per stream")
	firstByte := flag.Duration("first-byte", 200*time.Millisecond, "provider delay before each stream's first byte")
	tmpl := flag.String("template", "envoy/static-clusters.yaml.tmpl", "the Envoy template")
	flag.Parse()
	if *requests == 0 {
		*requests = 2 * *streams
	}
	if err := raiseNoFile(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	g, err := gatewaytest.Start(ctx, gatewaytest.Options{Template: *tmpl, Deployments: *deployments})
	if err != nil {
		return err
	}
	defer g.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = *streams, *streams
	client := openai.NewClient(option.WithBaseURL(g.Base+"/v1/"), option.WithAPIKey("sk-client"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithHeader(fakeprovider.FaultHeader, fmt.Sprintf("chunks=%d; first-byte=%s", *chunks, *firstByte)))
	want := expected(ctx, &client)
	if want == "" {
		return errors.New("the warm-up stream returned no text")
	}
	tr.CloseIdleConnections()
	before := settledGoroutines(0)

	type result struct {
		latency, ttft time.Duration
		kind          string
	}
	results := make([]result, *requests)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range *streams {
		wg.Go(func() {
			for i := range next {
				results[i].latency, results[i].ttft, results[i].kind = stream(ctx, &client, want)
			}
		})
	}
	for i := range *requests {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)

	errs := map[string]int{}
	var lat, ttft []time.Duration
	for _, r := range results {
		if r.kind != "" {
			errs[r.kind]++
			continue
		}
		lat, ttft = append(lat, r.latency), append(ttft, r.ttft)
	}
	fmt.Printf("streams: %d (%d concurrent) in %v, %.0f streams/s, %d chunks each, provider first byte after %v\n",
		*requests, *streams, took.Round(time.Millisecond), float64(*requests)/took.Seconds(), *chunks, *firstByte)
	fmt.Printf("errors: %d %v\n", *requests-len(lat), errs)
	fmt.Printf("latency: p50 %v p99 %v; time to first token: p50 %v p99 %v\n",
		pct(lat, 50), pct(lat, 99), pct(ttft, 50), pct(ttft, 99))
	var inFlight map[string]int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		inFlight, err = g.InFlight(context.Background())
		if err != nil {
			return err
		}
		if sum(inFlight) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("in flight afterwards: %v\n", inFlight)
	tr.CloseIdleConnections()
	after := settledGoroutines(before)
	fmt.Printf("goroutines: %d before the run, %d after (pooled idle connections of envoysim included)\n", before, after)
	if len(errs) > 0 || sum(inFlight) != 0 {
		return errors.New("errors or leaked in-flight attempts")
	}
	return nil
}

// stream runs one chat stream: its latency, time to first content, and error kind ("" ok).
func stream(ctx context.Context, c *openai.Client, want string) (time.Duration, time.Duration, string) {
	start := time.Now()
	var ttft time.Duration
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer s.Close()
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			if ch.Delta.Content != "" && ttft == 0 {
				ttft = time.Since(start)
			}
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr):
			return 0, 0, fmt.Sprintf("status %d", apiErr.StatusCode)
		case errors.Is(err, context.DeadlineExceeded):
			return 0, 0, "deadline"
		case strings.Contains(err.Error(), "error while streaming"):
			return 0, 0, "in-band error"
		default:
			return 0, 0, "transport: " + err.Error()
		}
	}
	if text.String() != want {
		return 0, 0, "truncated"
	}
	return time.Since(start), ttft, ""
}

// expected is the text of one stream, the answer every stream must return in full.
func expected(ctx context.Context, c *openai.Client) string {
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer s.Close()
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if s.Err() != nil {
		return ""
	}
	return text.String()
}

// settledGoroutines polls until the goroutine count stops falling (or reaches floor).
func settledGoroutines(floor int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > floor; i++ {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n && i >= 10 {
			break
		}
		n = m
	}
	return n
}

// raiseNoFile lifts the soft file-descriptor limit to the hard one: each stream holds a
// client, an upstream and a provider connection.
func raiseNoFile() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
		}
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Millisecond)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
