package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/switchyard-gw/switchyard/routing/config"
)

// WriteGate refuses configuration writes that would fork the configuration: a store that lost
// the configuration in force (a Redis restarted empty) holds an older version, and a write
// built on it would, once its version passed the one in force, replace the fleet's
// configuration with a nearly empty one. config.Guard implements it and restores the store.
type WriteGate interface {
	// Writable returns an error (a *config.StoreBehindError) when storeVersion, the version
	// a write just read, is behind the configuration in force.
	Writable(storeVersion uint64) error
}

// writable is the gate's answer for one write: nil, or a 503 in the admin API's error shape.
func (a *api) writable(storeVersion uint64) error {
	if a.gate == nil {
		return nil
	}
	err := a.gate.Writable(storeVersion)
	if err == nil {
		return nil
	}
	var behind *config.StoreBehindError
	if !errors.As(err, &behind) {
		return err
	}
	return &apiError{status: http.StatusServiceUnavailable, code: "config_store_behind",
		msg: fmt.Sprintf("The configuration store lost the configuration in force: it holds version %d, this gateway serves version %d. "+
			"It is being restored from the configuration in force; configuration writes are refused until then. Retry in a few seconds.",
			behind.Stored, behind.Served)}
}
