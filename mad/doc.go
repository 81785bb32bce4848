// Package mad speaks InfiniBand management datagrams (MADs) from the host:
// subnet management packets (SMPs) to the subnet manager and to the
// neighbour at the other end of a cable, subnet administration (SA)
// queries, and performance management (PMA) counter reads. Nothing it sends
// changes state on the fabric: every request is a Get.
//
// Two layers:
//
//   - lib.go binds libibumad (rdma-core's libibumad.so.3) through purego,
//     as package verbs binds libibverbs: a symbol table resolved at Open,
//     errors that carry the call and its errno, and C struct mirrors
//     (struct umad_ca, struct umad_port, struct ib_user_mad) checked
//     against <infiniband/umad.h> by layout_test.go. Ports are found
//     through libibumad itself (umad_get_cas_names, umad_get_ca), never by
//     reading sysfs here: the same code then runs on a host and under the
//     ibsim fabric simulator, whose LD_PRELOADed libumad2sim.so fakes
//     libibumad's view of the devices but not the files the Go runtime
//     reads itself.
//   - codec.go, smp.go, sa.go and pma.go encode requests and decode
//     answers in Go, table-driven, following the IBTA InfiniBand
//     Architecture Specification volume 1 (chapter 13.4 for the MAD
//     header, 14.2.5 for the SMP attributes, 15.2.5 for SA records, 16.1.3
//     for PMA counters). Decoders take any bytes and return an error, never
//     panic (fuzz_test.go).
//
// Why libibumad and hand encoding, not libibmad: libibmad (infiniband-diags)
// would encode the attributes for us, but its field accessors (mad_get_field
// over a table of bit offsets) return one value per call through a global
// field table, its query helpers (smp_query_via, sa_call) block with their
// own retry policy and print to stderr on failure, and it is a second
// library a host must carry (libibmad5) where libibumad (libibumad3) comes
// with every rdma-core install. The attributes this package needs are a few
// dozen fixed offsets; writing them as Go tables costs less than a binding
// to libibmad's calling conventions, keeps the decoders fuzzable without C,
// and leaves timeouts and retries to the caller (a check's deadline). The
// offsets are cross-checked with <infiniband/umad_sm.h>, umad_sa.h and
// umad_types.h where those headers define them, and with the answers of
// infiniband-diags (smpquery, sminfo, saquery, perfquery) against ibsim.
//
// The Transport interface is what the checks talk to, so their judging is
// tested against canned answers without the library.
package mad
