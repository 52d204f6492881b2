package extproc

import (
	"fmt"
	"time"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Conversions between the sealed state and the routing core's types. The proto enums are the
// routing values plus one (zero is "unspecified"), so a conversion is an offset and a range
// check; a state that fails the check was sealed by an incompatible replica.

// newState starts the state of a new logical request.
func newState(req *routing.Request, dialect statev1.Dialect, deadline time.Time) *statev1.State {
	mode := statev1.Mode_MODE_JSON
	if req.Stream {
		mode = statev1.Mode_MODE_STREAM
	}
	return &statev1.State{
		RequestId:        req.ID,
		PublicModel:      req.Model,
		Operation:        statev1.Operation(req.Operation) + 1,
		Mode:             mode,
		StartUnixNano:    req.Start.UnixNano(),
		DeadlineUnixNano: deadline.UnixNano(),
		Dialect:          dialect,
		Reason:           statev1.FallbackReason(config.ReasonGeneral) + 1,
	}
}

// requestOf returns the routing request of st. Facts come from the request body, which every
// pass parses again; they are not part of the state.
func requestOf(st *statev1.State) (routing.Request, error) {
	op := st.GetOperation()
	if op < statev1.Operation_OPERATION_TEXT || op > statev1.Operation_OPERATION_VIDEO_DOWNLOAD {
		return routing.Request{}, fmt.Errorf("attempt state: operation %d out of range", op)
	}
	var stream bool
	switch st.GetMode() {
	case statev1.Mode_MODE_JSON:
	case statev1.Mode_MODE_STREAM:
		stream = true
	default:
		return routing.Request{}, fmt.Errorf("attempt state: mode %d out of range", st.GetMode())
	}
	return routing.Request{
		ID: st.GetRequestId(), Model: st.GetPublicModel(), Operation: config.Operation(op - 1),
		Stream: stream, Start: time.Unix(0, st.GetStartUnixNano()).UTC(), Models: st.GetAllowedModels(),
	}, nil
}

// historyOf returns what happened so far in st's request.
func historyOf(st *statev1.State) (*routing.History, error) {
	reason, err := reasonOf(st.GetReason())
	if err != nil {
		return nil, err
	}
	h := &routing.History{Reason: reason, ReasonFrom: st.GetReasonFrom()}
	if n := len(st.GetAttempts()); n > 0 {
		h.Attempts = make([]routing.Attempt, n)
		for i, a := range st.GetAttempts() {
			if h.Attempts[i], err = attemptOf(a); err != nil {
				return nil, fmt.Errorf("attempt %d: %w", i+1, err)
			}
		}
	}
	if n := len(st.GetSkips()); n > 0 {
		h.Skips = make([]routing.Skip, n)
		for i, s := range st.GetSkips() {
			h.Skips[i] = skipOf(s)
		}
	}
	return h, nil
}

// putHistory writes h into st. h extends st's history (the routing core only appends), so the
// attempts st already holds keep how they were chosen, and attempts new in h take the choice
// of the attempt under way.
func putHistory(st *statev1.State, h *routing.History) {
	st.Reason = statev1.FallbackReason(h.Reason) + 1
	st.ReasonFrom = h.ReasonFrom
	old := st.GetAttempts()
	st.Attempts = make([]*statev1.Attempt, len(h.Attempts))
	for i := range h.Attempts {
		a := attemptProto(&h.Attempts[i])
		if i < len(old) {
			a.Move, a.FallbackReason, a.FallbackHop, a.Probe = old[i].GetMove(), old[i].GetFallbackReason(), old[i].GetFallbackHop(), old[i].GetProbe()
			a.ProviderRequestId = old[i].GetProviderRequestId()
		} else {
			chosenAs(a, st.GetCurrent())
		}
		st.Attempts[i] = a
	}
	st.Skips = make([]*statev1.Skip, len(h.Skips))
	for i, s := range h.Skips {
		st.Skips[i] = skipProto(s)
	}
}

// beginAttempt records in st that the attempt attemptID starts now on the deployment d chose,
// with the skips d found. hop is the fallback hop of d.Model (0: the requested model).
func beginAttempt(st *statev1.State, d *routing.Decision, attemptID string, now time.Time, hop uint32) {
	st.Reason = statev1.FallbackReason(d.Reason) + 1
	for _, s := range d.Skips {
		st.Skips = append(st.Skips, skipProto(s))
	}
	st.Current = &statev1.Current{
		DeploymentId:   d.Deployment.ID,
		Model:          d.Model,
		AttemptId:      attemptID,
		StartUnixNano:  now.UnixNano(),
		Move:           statev1.Move(d.Move) + 1,
		FallbackReason: statev1.FallbackReason(d.Reason) + 1,
		FallbackHop:    hop,
		Probe:          d.Probe,
		Pick:           d.Pick.String(),
		AllOpenTry:     d.AllOpenTry,
		ReasonFrom:     d.ReasonFrom,
		ReservedTokens: d.Reserved.Tokens,
	}
	if !d.Reserved.At.IsZero() {
		st.Current.ReservedUnixNano = d.Reserved.At.UnixNano()
	}
}

// reservedOf is the reservation the attempt under way was decided with.
func reservedOf(c *statev1.Current) store.ReservedTokens {
	if c.GetReservedUnixNano() == 0 {
		return store.ReservedTokens{}
	}
	return store.ReservedTokens{At: time.Unix(0, c.GetReservedUnixNano()), Tokens: c.GetReservedTokens()}
}

// chosenAs copies how the router chose the attempt under way onto its record.
func chosenAs(a *statev1.Attempt, c *statev1.Current) {
	a.Move, a.FallbackReason, a.FallbackHop, a.Probe = c.GetMove(), c.GetFallbackReason(), c.GetFallbackHop(), c.GetProbe()
	a.Pick, a.AllOpenTry = c.GetPick(), c.GetAllOpenTry()
}

// recordAttempt ends the attempt under way in st with its outcome, through
// routing.History.Record (the one way a History grows, so the fallback reason and the model
// that chose it stay with the request). dep is the deployment the attempt ran on.
func recordAttempt(st *statev1.State, dep *config.Deployment, c failure.Classification, latency time.Duration) error {
	h, err := historyOf(st)
	if err != nil {
		return err
	}
	cur := st.GetCurrent()
	reason, err := reasonOf(cur.GetFallbackReason())
	if err != nil {
		return err
	}
	d := routing.Decision{Action: routing.ActionAttempt, Deployment: dep, Model: cur.GetModel(), Reason: reason, ReasonFrom: cur.GetReasonFrom()}
	h.Record(&d, c, latency)
	putHistory(st, h)
	st.Current = nil
	return nil
}

func attemptProto(a *routing.Attempt) *statev1.Attempt {
	return &statev1.Attempt{
		DeploymentId:     a.Deployment,
		Model:            a.Model,
		Class:            statev1.Class(a.Class) + 1,
		Kind:             string(a.Kind),
		Quota:            a.Quota,
		Status:           int32(a.Status),
		LatencyNanos:     int64(a.Latency),
		RetryAfterNanos:  int64(a.RetryAfter),
		RetryAfterHeader: a.RetryAfterHeader,
		Message:          a.Message,
		ErrorType:        a.Type,
		ErrorCode:        a.Code,
	}
}

func attemptOf(a *statev1.Attempt) (routing.Attempt, error) {
	c := a.GetClass()
	if c < statev1.Class_CLASS_NONE || c > statev1.Class_CLASS_INCOMPATIBLE {
		return routing.Attempt{}, fmt.Errorf("attempt state: class %d out of range", c)
	}
	return routing.Attempt{
		Deployment:       a.GetDeploymentId(),
		Model:            a.GetModel(),
		Class:            failure.Class(c - 1),
		Kind:             failure.Kind(a.GetKind()),
		Quota:            a.GetQuota(),
		Status:           int(a.GetStatus()),
		RetryAfter:       time.Duration(a.GetRetryAfterNanos()),
		RetryAfterHeader: a.GetRetryAfterHeader(),
		Latency:          time.Duration(a.GetLatencyNanos()),
		Type:             a.GetErrorType(),
		Code:             a.GetErrorCode(),
		Message:          a.GetMessage(),
	}, nil
}

func reasonOf(r statev1.FallbackReason) (config.Reason, error) {
	if r < statev1.FallbackReason_FALLBACK_REASON_GENERAL || r > statev1.FallbackReason_FALLBACK_REASON_CONTENT_POLICY {
		return 0, fmt.Errorf("attempt state: fallback reason %d out of range", r)
	}
	return config.Reason(r - 1), nil
}
