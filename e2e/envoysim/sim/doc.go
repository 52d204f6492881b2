// Package sim is envoysim: a Go stand-in for the Envoy features switchyard uses, for
// end-to-end tests on machines without an Envoy binary.
//
// It loads a real Envoy v3 bootstrap (LoadFile/Load), rejects every field and
// extension it does not implement, and runs what the bootstrap describes: HTTP/1.1
// and h2c listeners with the HTTP connection manager, the ext_proc filter (downstream
// and as a cluster upstream filter), the router with retries, timeouts and internal
// redirects, static clusters and CDS/EDS/RDS over ADS, and upstream TLS.
//
// Every behaviour imitates a named Envoy source file or doc; comments cite them.
// Envoysim is a test and development tool, never a production data plane.
//
// Typical use:
//
//	bs, err := sim.LoadFile("envoy/envoy.yaml")
//	s, err := sim.New(bs,
//		sim.WithListenerAddress("ingress", "127.0.0.1:0"),
//		sim.WithClusterAddress("switchyard_extproc", extProcAddr))
//	err = s.Start(ctx)
//	defer s.Close()
//	url := "http://" + s.Addr("ingress")
package sim
