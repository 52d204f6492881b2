package redisstore

// Test hooks, compiled only into this package's tests.

// WithoutPublish makes config writes skip their pub/sub notification, the way a message
// is lost when a subscriber is disconnected: only version polling can then deliver it.
func WithoutPublish() Option { return func(o *options) { o.publish = false } }

// ConfigChannel is the pub/sub channel of config notifications.
func (s *Store) ConfigChannel() string { return s.keys.configChannel() }

// InflightKey is the in-flight sorted set of a deployment.
func (s *Store) InflightKey(deploymentID string) string { return s.keys.inflight(deploymentID) }
