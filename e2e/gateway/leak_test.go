package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// TestStreamsWithRandomFaultsLeakNothing: 500 streams (openai-go chat, some anthropic-sdk-go
// messages) with random faults, 20 at a time. Every client outcome is the whole answer or an
// SDK error — never a silently truncated success — and afterwards no deployment has an
// attempt in flight and no goroutine of switchyard, envoysim or the fakes is left.
func TestStreamsWithRandomFaultsLeakNothing(t *testing.T) {
	const streams, concurrency = 500, 20
	deps := twoDeployments(deployment{IdleMs: 300})
	deps[1].IdleMs = 300
	deps = append(deps, deployment{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic, IdleMs: 300})
	// Circuits stay closed (or are tried anyway) so the outcome of a stream is its own
	// fault's, not the run's history.
	settings := priceBased()
	settings.AllowedFails, settings.CooldownSeconds = proto.Uint32(10_000), proto.Uint32(0)
	settings.WhenAllOpen = proto.String("try")
	g := startGateway(t, deps, gatewayOptions{settings: settings})
	// Our own transport, so its idle connections can be closed before counting goroutines.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: tr}
	before := gatewayGoroutines()
	baseline := runtime.NumGoroutine()

	rng := rand.New(rand.NewPCG(10, 500))
	faults := make([]string, streams)
	for i := range faults {
		faults[i] = randomFault(rng)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for w := 0; w < concurrency; w++ {
		wg.Go(func() {
			for i := range next {
				kind, text, err, began := "chat", "", error(nil), time.Now()
				if i%5 == 0 {
					kind = "anthropic"
					text, err = streamAnthropic(ctx, g, hc, faults[i])
				} else {
					text, err = streamChatWith(ctx, g, hc, faults[i])
				}
				mu.Lock()
				if d := time.Since(began); d > 5*time.Second {
					t.Logf("stream %d (%s, %q) took %v", i, kind, faults[i], d)
				}
				switch {
				case err == nil && text != fullText:
					t.Errorf("stream %d (%s, %q): success with %q, want %q", i, kind, faults[i], text, fullText)
				case err == nil:
					outcomes[kind+" ok"]++
				case ctx.Err() != nil:
					t.Errorf("stream %d (%s, %q): run out of time: %v", i, kind, faults[i], err)
				default:
					if outcomes[kind+" error"] < 8 {
						t.Logf("stream %d (%s, %q): %v", i, kind, faults[i], err)
					}
					outcomes[kind+" error"]++
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	var during int
	for i := range streams {
		next <- i
		if i == streams/2 {
			during = len(gatewayGoroutines())
		}
	}
	close(next)
	wg.Wait()
	t.Logf("%d streams in %v: %v", streams, time.Since(start).Round(time.Millisecond), outcomes)
	if outcomes["chat ok"] < streams/2 || outcomes["chat error"] == 0 || outcomes["anthropic ok"] == 0 {
		t.Errorf("outcomes %v: the fault mix should give both", outcomes)
	}

	eventually(t, "in-flight back to 0 on every deployment", func() bool { return g.inFlight("a", "b", "an") == 0 })
	for _, id := range []string{"a", "b", "an"} {
		if n := g.inFlight(id); n != 0 {
			t.Errorf("deployment %s: %d attempts in flight", id, n)
		}
	}
	if during <= len(before) {
		t.Fatalf("the goroutine check saw %d gateway goroutines mid-run (%d before): it cannot see a leak", during, len(before))
	}
	tr.CloseIdleConnections()
	deadline := time.Now().Add(wait)
	for {
		left := gatewayGoroutines()
		if len(left) <= len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d gateway goroutines left (%d before), e.g.:\n%s", len(left), len(before), left[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("goroutines: %d before the run, %d after (idle pooled connections included)", baseline, runtime.NumGoroutine())
}

// randomFault is one x-fake-fault value (empty: none).
func randomFault(rng *rand.Rand) string {
	server := ""
	if rng.IntN(4) > 0 {
		server = "server=a; " // a fails, b serves (or, unscoped, both fail)
	}
	switch rng.IntN(10) {
	case 0, 1:
		return ""
	case 2:
		return server + fmt.Sprintf("end=reset; after=%d", rng.IntN(5))
	case 3:
		return server + fmt.Sprintf("end=error; after=%d", rng.IntN(5))
	case 4:
		return server + fmt.Sprintf("end=cut; after=%d", rng.IntN(5))
	case 5:
		return server + fmt.Sprintf("end=nodone; after=%d", rng.IntN(5))
	case 6:
		return server + fmt.Sprintf("stall=2s; stall-after=%d", rng.IntN(4))
	// Status faults always fail a over to b: the same status from every deployment would
	// make the route role wait out backoffs and Retry-After, which is not this test's subject.
	case 7:
		return "server=a; status=500"
	case 8:
		return "server=a; status=429"
	default:
		return fmt.Sprintf("first-byte=%dms", 10+rng.IntN(100))
	}
}

// streamChatWith streams a chat completion with openai-go over hc.
func streamChatWith(ctx context.Context, g *gateway, hc *http.Client, fault string) (string, error) {
	opts := []option.RequestOption{option.WithHTTPClient(hc)}
	if fault != "" {
		opts = append(opts, option.WithHeader(fakeprovider.FaultHeader, fault))
	}
	s := g.openai(opts...).Chat.Completions.NewStreaming(ctx, chat("gpt-4o"))
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil || len(acc.Choices) == 0 {
		return "", fmt.Errorf("chat stream (%d choices): %w", len(acc.Choices), err)
	}
	return acc.Choices[0].Message.Content, nil
}

// streamAnthropic streams a message with anthropic-sdk-go over hc (faults scoped to a do not
// apply: the Anthropic deployment is "an").
func streamAnthropic(ctx context.Context, g *gateway, hc *http.Client, fault string) (string, error) {
	opts := []anthropicoption.RequestOption{anthropicoption.WithHTTPClient(hc)}
	if strings.Contains(fault, "status=") {
		fault = "" // the Anthropic deployment has nowhere to fail over to
	}
	if fault = strings.TrimPrefix(fault, "server=a; "); fault != "" {
		opts = append(opts, anthropicoption.WithHeader(fakeprovider.FaultHeader, fault))
	}
	ms := g.anthropic(opts...).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	defer ms.Close()
	var msg anthropic.Message
	for ms.Next() {
		if err := msg.Accumulate(ms.Current()); err != nil {
			return "", err
		}
	}
	if err := ms.Err(); err != nil {
		return "", err
	}
	var text strings.Builder
	for _, c := range msg.Content {
		text.WriteString(c.Text)
	}
	return text.String(), nil
}

// gatewayGoroutines are the stacks of goroutines running code of switchyard's ext_proc
// server, envoysim's streams and filters, or the fake providers' handlers: each belongs to a
// request, so none may outlive the run.
func gatewayGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, pkg := range []string{
			"switchyard/extproc.", "switchyard/e2e/envoysim/sim.(*activeStream)", "switchyard/e2e/envoysim/sim/extproc.",
			"switchyard/e2e/envoysim/sim.(*upstream", "switchyard/e2e/fakeprovider.",
		} {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
