package memstore_test

import (
	"testing"

	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		// One process, one state: every "replica" is the same store.
		s := memstore.New()
		return func() store.Store { return noClose{s} }
	})
}

// noClose lets the suite close each handle while the shared store stays open.
type noClose struct{ store.Store }

func (noClose) Close() error { return nil }
