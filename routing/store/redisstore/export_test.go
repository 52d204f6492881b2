package redisstore

import (
	"context"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Test hooks, compiled only into this package's tests.

// WithoutPublish makes config writes skip their pub/sub notification, the way a message
// is lost when a subscriber is disconnected: only version polling can then deliver it.
func WithoutPublish() Option { return func(o *options) { o.publish = false } }

// WithPipelinedReads makes ReadStates read with a pipeline of GETs, the path of a Cluster
// client, even on a single-node client that would use one MGET.
func WithPipelinedReads() Option { return func(o *options) { o.pipelined = true } }

// ConfigChannel is the pub/sub channel of config notifications.
func (s *Store) ConfigChannel() string { return s.keys.configChannel() }

// InflightKey is the in-flight sorted set of a deployment.
func (s *Store) InflightKey(deploymentID string) string { return s.keys.inflight(deploymentID) }

// StateKey is the state record of a deployment.
func (s *Store) StateKey(deploymentID string) string { return s.keys.state(deploymentID) }

// InFlightSummary is the in-flight summary stored in a deployment's state record: the
// number of entries and the earliest expiry among them (Unix µs).
func (s *Store) InFlightSummary(ctx context.Context, deploymentID string) (n, earliest int64, err error) {
	v, err := s.rdb.Get(ctx, s.keys.state(deploymentID)).Result()
	if err != nil {
		return 0, 0, err
	}
	var st store.DeploymentState
	n, earliest = parseState(v, 0, &st)
	return n, earliest, nil
}
