// Package verbs is a binding of libibverbs for a cgo-free binary.
//
// The library is opened at run time with purego (dlopen/dlsym), so a binary
// built with CGO_ENABLED=0 starts on a host that has no libibverbs at all;
// Open then fails with the loader's own message, which is itself a finding.
// Every symbol is resolved with dlsym before any call, and all missing ones
// are reported by name (MissingSymbolsError) instead of failing on the first.
//
// What the binding does differently from a C program, and why:
//
//   - errno: purego does not return errno on linux, so every call runs on a
//     locked OS thread that clears errno before the call and reads it through
//     libc's __errno_location right after it.
//   - Results of C functions that return int are read as int32.
//   - ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are
//     static inline functions in <infiniband/verbs.h>: they are called
//     through the function pointers in struct ibv_context's ops, as the
//     header's inline bodies do.
//   - ibv_query_port is a macro over an inline that calls
//     verbs_context->query_port with the size of the modern struct
//     ibv_port_attr; the exported symbol fills only the old, shorter struct.
//     QueryPort mirrors the inline path and falls back to the exported
//     symbol exactly where the inline would.
//   - Memory handed to the library (registered buffers, work requests,
//     scatter/gather lists, work-completion arrays, attribute structs) lives
//     outside the Go heap, in anonymous mmap'd memory, so the garbage
//     collector never moves or frees what the library or the device holds.
//   - Structs the library reads or fills are mirrored field by field in Go
//     with C layout; objects the library owns (ibv_context, ibv_cq, ...) are
//     read through prefix mirrors, by offset. The layout test compares every
//     mirrored size, offset and enum value with the real <infiniband/verbs.h>.
//
// Errors from verbs are *Error values carrying the verb and the errno, and
// read like "ibv_reg_mr: ENOMEM (cannot allocate memory)"; errors.Is works
// with syscall.Errno values.
//
// A Lib is safe for use by one goroutine at a time per Context; the probes
// drive it from a single goroutine in a child process.
package verbs
