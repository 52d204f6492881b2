// Package attemptstate owns the attempt state of one logical request (docs/design.md,
// "Attempt state"): what the route role, the attempt role and the trampoline of any replica
// need to carry the request from one attempt to the next, and its sealing. The roles ask a
// State for what they need (begin an attempt, record its outcome, the request, the history,
// the client's saved headers, the URL to redirect to) and never see the generated message
// (proto/switchyard/state/v1), which only this package reads and writes.
package attemptstate

import (
	"fmt"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// State is the attempt state of one logical request. It is not safe for concurrent use: one
// role's processor owns it for one pass.
type State struct {
	m statev1.State
}

// New starts the state of a new logical request in the client's dialect d, expiring at
// deadline.
func New(req *routing.Request, d dialect.Dialect, deadline time.Time) *State {
	mode := statev1.Mode_MODE_JSON
	if req.Stream {
		mode = statev1.Mode_MODE_STREAM
	}
	st := &State{}
	st.m = statev1.State{
		RequestId:        []byte(req.ID),
		PublicModel:      req.Model,
		Operation:        statev1.Operation(req.Operation) + 1,
		Mode:             mode,
		StartUnixNano:    req.Start.UnixNano(),
		DeadlineUnixNano: deadline.UnixNano(),
		Dialect:          dialectProto(d),
		Reason:           statev1.FallbackReason(config.ReasonGeneral) + 1,
		AllowedModels:    req.Models,
	}
	return st
}

// RequestID is the logical request's id.
func (st *State) RequestID() string { return string(st.m.RequestId) }

// PublicModel is the model the client asked for.
func (st *State) PublicModel() string { return st.m.PublicModel }

// Dialect is the API the client speaks.
func (st *State) Dialect() dialect.Dialect { return dialectOf(st.m.Dialect) }

// Start is when the logical request began.
func (st *State) Start() time.Time { return time.Unix(0, st.m.StartUnixNano) }

// Deadline is the logical request's end (start + totalMs); the state expires then.
func (st *State) Deadline() time.Time { return time.Unix(0, st.m.DeadlineUnixNano) }

// Redirect counts one more internal redirect (a re-entry of the route role) and returns how
// many the request took.
func (st *State) Redirect() int {
	st.m.Redirects++
	return int(st.m.Redirects)
}

// Redirects is how many internal redirects the request took.
func (st *State) Redirects() int { return int(st.m.Redirects) }

// Request is the routing request the state stands for. Facts come from the request body,
// which every pass parses again; they are not part of the state.
func (st *State) Request() (routing.Request, error) {
	op := st.m.Operation
	if op < statev1.Operation_OPERATION_TEXT || op > statev1.Operation_OPERATION_VIDEO_DOWNLOAD {
		return routing.Request{}, fmt.Errorf("attempt state: operation %d out of range", op)
	}
	var stream bool
	switch st.m.Mode {
	case statev1.Mode_MODE_JSON:
	case statev1.Mode_MODE_STREAM:
		stream = true
	default:
		return routing.Request{}, fmt.Errorf("attempt state: mode %d out of range", st.m.Mode)
	}
	return routing.Request{
		ID: st.RequestID(), Model: st.m.PublicModel, Operation: config.Operation(op - 1),
		Stream: stream, Start: st.Start().UTC(), Models: st.m.AllowedModels,
	}, nil
}

// History is what happened so far in the request: its finished attempts, skips and the
// fallback chain it follows.
func (st *State) History() (*routing.History, error) {
	reason, err := reasonOf(st.m.Reason)
	if err != nil {
		return nil, err
	}
	h := &routing.History{Reason: reason, ReasonFrom: st.m.ReasonFrom, Skips: st.Skips()}
	if n := len(st.m.Attempts); n > 0 {
		h.Attempts = make([]routing.Attempt, n)
		for i, a := range st.m.Attempts {
			if h.Attempts[i], err = attemptOf(a); err != nil {
				return nil, fmt.Errorf("attempt %d: %w", i+1, err)
			}
		}
	}
	return h, nil
}

// Attempts counts the finished attempts.
func (st *State) Attempts() int { return len(st.m.Attempts) }

// Skips are the deployments and models routing passed over, and why.
func (st *State) Skips() []routing.Skip {
	if len(st.m.Skips) == 0 {
		return nil
	}
	out := make([]routing.Skip, len(st.m.Skips))
	for i, s := range st.m.Skips {
		out[i] = skipOf(s)
	}
	return out
}

// Begin records that the attempt attemptID, which d decided, starts now, with the skips d
// found.
func (st *State) Begin(d *routing.Decision, attemptID string, now time.Time) {
	for _, s := range d.Skips {
		st.m.Skips = append(st.m.Skips, skipProto(s))
	}
	a := d.Attempt()
	st.m.Reason = statev1.FallbackReason(a.Reason) + 1
	st.m.Current = &statev1.Current{
		DeploymentId:   a.Deployment,
		Model:          a.Model,
		AttemptId:      []byte(attemptID),
		StartUnixNano:  now.UnixNano(),
		Move:           statev1.Move(a.Move) + 1,
		FallbackReason: statev1.FallbackReason(a.Reason) + 1,
		FallbackHop:    uint32(a.FallbackHop),
		Probe:          a.Probe,
		Pick:           a.Pick.String(),
		AllOpenTry:     a.AllOpenTry,
		ReasonFrom:     a.ReasonFrom,
		ReservedTokens: d.Reserved.Tokens,
	}
	if !d.Reserved.At.IsZero() {
		st.m.Current.ReservedUnixNano = d.Reserved.At.UnixNano()
	}
}

// Current is the attempt under way, as Begin recorded it.
type Current struct {
	// Attempt is how the router chose it; its outcome fields are empty.
	routing.Attempt
	// ID is unique per attempt (the in-flight entry's key).
	ID string
	// Started is when the route role sent it.
	Started time.Time
	// Reserved is the share of the deployment's minute reserved for it (behaviour §4.1).
	Reserved store.ReservedTokens
}

// Current is the attempt under way; ok is false when there is none.
func (st *State) Current() (cur Current, ok bool) {
	c := st.m.Current
	if c == nil || c.DeploymentId == "" {
		return Current{}, false
	}
	cur = Current{
		Attempt: routing.Attempt{
			Deployment: c.DeploymentId, Model: c.Model, Move: moveOf(c.Move), Pick: pickOf(c.Pick),
			Probe: c.Probe, AllOpenTry: c.AllOpenTry, FallbackHop: int(c.FallbackHop),
			Reason: reasonOrGeneral(c.FallbackReason), ReasonFrom: c.ReasonFrom,
		},
		ID:      string(c.AttemptId),
		Started: time.Unix(0, c.StartUnixNano),
	}
	if c.ReservedUnixNano != 0 {
		cur.Reserved = store.ReservedTokens{At: time.Unix(0, c.ReservedUnixNano), Tokens: c.ReservedTokens}
	}
	return cur, true
}

// Finish ends the attempt under way with its outcome: it joins the finished attempts, and
// the fallback chain it was chosen under is the one the next decision follows.
// providerRequestID is the provider's id of its answer ("" when there was none). It returns
// the finished attempt. It is the one place a finished attempt is recorded.
func (st *State) Finish(c failure.Classification, latency time.Duration, providerRequestID string) (routing.Attempt, error) {
	cur, ok := st.Current()
	if !ok {
		return routing.Attempt{}, fmt.Errorf("attempt state: no attempt under way")
	}
	a := cur.Attempt
	a.Finish(c, latency)
	a.ProviderRequestID = providerRequestID
	rec := attemptProto(&a)
	// Kept as chosen: a value this replica does not know survives the round trip.
	rec.Move, rec.FallbackReason, rec.Pick = st.m.Current.Move, st.m.Current.FallbackReason, st.m.Current.Pick
	st.m.Attempts = append(st.m.Attempts, rec)
	st.m.Reason, st.m.ReasonFrom = rec.FallbackReason, a.ReasonFrom
	st.m.Current = nil
	return a, nil
}

// SetAllowedModels keeps the client key's allow-list with the request: its fallbacks on
// every later pass stay within it.
func (st *State) SetAllowedModels(models []string) { st.m.AllowedModels = models }

func attemptProto(a *routing.Attempt) *statev1.Attempt {
	return &statev1.Attempt{
		DeploymentId:      a.Deployment,
		Model:             a.Model,
		Class:             statev1.Class(a.Class) + 1,
		Kind:              string(a.Kind),
		Quota:             a.Quota,
		Status:            int32(a.Status),
		LatencyNanos:      int64(a.Latency),
		RetryAfterNanos:   int64(a.RetryAfter),
		RetryAfterHeader:  a.RetryAfterHeader,
		Message:           a.Message,
		ErrorType:         a.Type,
		ErrorCode:         a.Code,
		Move:              statev1.Move(a.Move) + 1,
		FallbackReason:    statev1.FallbackReason(a.Reason) + 1,
		FallbackHop:       uint32(a.FallbackHop),
		Probe:             a.Probe,
		Pick:              a.Pick.String(),
		AllOpenTry:        a.AllOpenTry,
		ProviderRequestId: a.ProviderRequestID,
	}
}

func attemptOf(a *statev1.Attempt) (routing.Attempt, error) {
	c := a.Class
	if c < statev1.Class_CLASS_NONE || c > statev1.Class_CLASS_INCOMPATIBLE {
		return routing.Attempt{}, fmt.Errorf("attempt state: class %d out of range", c)
	}
	return routing.Attempt{
		Deployment:        a.DeploymentId,
		Model:             a.Model,
		Move:              moveOf(a.Move),
		Pick:              pickOf(a.Pick),
		Probe:             a.Probe,
		AllOpenTry:        a.AllOpenTry,
		FallbackHop:       int(a.FallbackHop),
		Reason:            reasonOrGeneral(a.FallbackReason),
		Class:             failure.Class(c - 1),
		Kind:              failure.Kind(a.Kind),
		Quota:             a.Quota,
		Status:            int(a.Status),
		RetryAfter:        time.Duration(a.RetryAfterNanos),
		RetryAfterHeader:  a.RetryAfterHeader,
		Latency:           time.Duration(a.LatencyNanos),
		Type:              a.ErrorType,
		Code:              a.ErrorCode,
		Message:           a.Message,
		ProviderRequestID: a.ProviderRequestId,
	}, nil
}
