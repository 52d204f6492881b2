package routing

import (
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Action is what to do next.
type Action uint8

const (
	// ActionAttempt: send the request to Decision.Deployment after Decision.Wait.
	ActionAttempt Action = iota
	// ActionStop: answer the client with Decision.Stop.
	ActionStop
)

// Move names the kind of step an attempt is (behaviour §7.7).
type Move uint8

const (
	MoveFirst    Move = iota // the request's first attempt
	MoveFailover             // an equivalent deployment of the same model
	MoveRetry                // the same deployment again, after a wait
	MoveFallback             // another public model
)

func (m Move) String() string {
	switch m {
	case MoveFailover:
		return "failover"
	case MoveRetry:
		return "retry"
	case MoveFallback:
		return "fallback"
	default:
		return "first"
	}
}

// Decision is the router's answer.
type Decision struct {
	Action     Action
	Move       Move
	Deployment *config.Deployment
	// Model is the public model being served (differs from the request's on a fallback).
	Model  string
	Reason config.Reason
	// ReasonFrom is the model whose refusal chose a context-window or content-policy chain.
	ReasonFrom string
	// Wait before sending the attempt (behaviour §7.2).
	Wait time.Duration
	// Policy is the execution policy for this attempt (global, lowered by the deployment's
	// overrides).
	Policy config.Policy
	// Deadline is the logical request's end (start + totalMs).
	Deadline time.Time
	// ResponseTimeout is the time this attempt may take to answer (JSON: whole response;
	// stream: headers), already cut to what is left before the deadline after the wait.
	ResponseTimeout time.Duration
	// Pick says how the deployment was chosen (behaviour §10.1).
	Pick Pick
	// Probe: this attempt owns the deployment's half-open probe (behaviour §5.4).
	Probe bool
	// AllOpenTry: every circuit was open and whenAllOpen "try" ignored them (behaviour §7.5).
	AllOpenTry bool
	// FallbackHop is how many models the request moved through to reach Model: 0 for the
	// requested model, n for the n-th fallback model it moved to.
	FallbackHop int
	// Skips found by this decision, to append to the History.
	Skips []Skip
	// Reserved is the share of the deployment's minute taken for this attempt under its
	// rpmLimit/tpmLimit (behaviour §4.1); zero when it has no limits. The attempt starts and
	// finishes with it (Router.StartAttempt, Result.Reserved); an attempt that is not made
	// gives it back (Router.Unreserve).
	Reserved store.ReservedTokens
	// Stop is set when Action is ActionStop.
	Stop *StopError
	// Degraded: the shared store could not be read; eligibility used neutral state.
	Degraded bool
}

// Attempt is the record of the attempt d decided, before its outcome (Attempt.Finish): the
// attempt state carries it while the attempt runs, so recording the outcome needs no
// decision.
func (d *Decision) Attempt() Attempt {
	a := Attempt{Model: d.Model, Move: d.Move, Pick: d.Pick, Probe: d.Probe, AllOpenTry: d.AllOpenTry,
		FallbackHop: d.FallbackHop, Reason: d.Reason, ReasonFrom: d.ReasonFrom}
	if d.Deployment != nil {
		a.Deployment = d.Deployment.ID
	}
	return a
}

// StopError is the error a stopped request ends with, independent of the client's dialect.
type StopError struct {
	// Status is the HTTP status for the client.
	Status int
	// Code is the error code: rate_limit_exceeded, model_overloaded, model_unavailable,
	// model_not_found, capability_unsupported, timeout, or the provider's own code when
	// Upstream is set.
	Code string
	// Type is the provider's error type when Upstream is set.
	Type    string
	Message string
	Kind    failure.Kind
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
	// Upstream: Status and Message are what the last upstream said (behaviour §7.4).
	Upstream bool
}

// Error implements error.
func (e *StopError) Error() string { return e.Code + ": " + e.Message }

// MinAttemptTime is the least time left before the deadline that still makes an attempt
// worth sending (behaviour §6.4: stop when the remaining time cannot fit another meaningful
// attempt). One second covers a connection and a provider's fast failure.
const MinAttemptTime = time.Second

// Backoff bounds of behaviour §7.2 (the official SDKs' values).
const (
	BackoffBase     = 500 * time.Millisecond
	BackoffMax      = 8 * time.Second
	RetryAfterLimit = 60 * time.Second
	// JitterFraction: waits get up to 25% added.
	JitterFraction = 0.25
)

// inFlightGrace is added to an attempt's deadline for its in-flight entry, so a slow but live
// attempt is not expired while it still runs.
const inFlightGrace = time.Minute
