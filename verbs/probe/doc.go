// Package probe runs the verbs checks in a child process: the level-1
// enumeration (what ibv_devices shows) and the level-2 probes
// (verbs.resources, verbs.qp_state, probe.send_poll, probe.cq_overflow,
// probe.destroy_order, probe.ud) on each port of a device. A Target marked
// NoRC (a device without RC queue pairs: EFA) gets a UD QP in
// verbs.resources and skips the RC probes with that reason.
//
// Every call into libibverbs happens in a child: the same executable,
// re-executed with ChildArg as its first argument. A provider that hangs or
// crashes in a verb costs its device one failed result, never the run, and
// killing the child frees its verbs resources (the kernel cleans up when
// the uverbs file closes).
//
// The parent side:
//
//   - Enumerate(ctx, exe, libPath, timeout) runs ibv_get_device_list and
//     returns an *Enumeration: the library's load error or missing symbols,
//     the errno of a NULL list (ENOSYS), the devices with their node GUIDs,
//     the provider libraries loaded and what the library printed.
//   - Run(ctx, exe, targets, opts) probes every Target (a device and its
//     ports) in parallel, one child per device, and returns *Results with a
//     DeviceResult per device: per port, one typed result per probe, each
//     a list of Steps (the call, ok, errno and its name, the cause that
//     errno means at that step, the time taken) plus the measurements the
//     checks judge.
//
// A child's deadline is Options.Timeout per port, plus a fixed margin for
// its start (exec, dlopen, the providers' initialisation); past it the
// child's process group is killed with SIGKILL and the result says which
// step it was in. The child keeps each port's deadline itself: every wait
// ends at it, and the probes left when it has passed are not run, each
// saying so (Probe.OutOfTime). A child that dies of a signal, or whose Go runtime reports a
// fault in C code ("[signal SIGSEGV ...]", exit status 2), is reported
// with the signal's name. SIGINT and SIGTERM that reach the parent during
// Run or Enumerate are sent on to the children (which lead their own
// process groups, so a terminal's Ctrl-C does not reach them itself);
// Results.Interrupted names the signal and the caller should stop. The children run with Pdeathsig, so they die
// with the parent.
//
// The child side: the command's main must dispatch before parsing flags:
//
//	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
//		os.Exit(probe.ChildMain(os.Args[2:]))
//	}
//
// The child reads its request (JSON) on stdin and writes JSON lines on
// file descriptor 3 — a "begin" line before each step, a "result" line
// after each probe, "done" at the end — so whatever the library prints on
// stdout or stderr cannot corrupt the results, and a child that dies
// mid-way still tells how far it got.
//
// A two-host session (`rdmadoctor peer`) runs in a child too, one per
// session on each side: PeerServe and PeerTest hand the session's TCP
// connection to the child as fd 4, after the parent's handshake; the
// child speaks the rest of the control protocol (package verbs/peer/wire)
// itself, builds its own QP and memory region, and the client's child
// emits one result per peer check (peer.connect … peer.counters), each run
// only when the one before passed. Every wait ends at the session's
// deadline, and killing the child frees its verbs objects.
//
// The probes build two RC QPs on the same port and connect them to each
// other: on RoCE through a GID of the port (RoCE v2, IPv4-mapped first),
// on InfiniBand through the port's LID. retry_cnt and rnr_retry are 3, so
// a broken path ends in RETRY_EXC_ERR instead of retrying forever. iWARP
// RC QPs connect only through rdma_cm, so on an iWARP device only
// verbs.resources runs and the probes that connect QPs are skipped.
package probe
