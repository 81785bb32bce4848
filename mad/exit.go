package mad

import (
	"os"

	"github.com/ebitengine/purego"
)

// Exit ends the process with code. Under the ibsim simulator it ends it
// through the C library's exit, so that libumad2sim.so's atexit handler
// runs: it tells ibsim the client is gone (ibsim serves at most 10 clients
// and never frees a slot on its own) and removes the fake sysfs tree it
// made in the working directory. os.Exit skips C atexit handlers, so a Go
// program that exits through it leaks one of ibsim's slots per run. On a
// host (no libumad2sim.so loaded) Exit is os.Exit.
func Exit(code int) {
	if fn := simulatorExit(); fn != 0 {
		purego.SyscallN(fn, uintptr(code))
	}
	os.Exit(code)
}

// Simulated reports whether the ibsim simulator's libumad2sim.so is loaded
// in this process (LD_PRELOADed, as ibsim-run does): libibumad's devices
// are then the simulator's, and the host's sysfs says nothing about them.
func Simulated() bool {
	sim, err := purego.Dlsym(purego.RTLD_DEFAULT, "sim_client_exit")
	return err == nil && sim != 0
}

// simulatorExit is the C library's exit when libumad2sim.so is loaded in
// this process, 0 otherwise.
func simulatorExit() uintptr {
	if !Simulated() {
		return 0
	}
	exit, err := purego.Dlsym(purego.RTLD_DEFAULT, "exit")
	if err != nil {
		return 0
	}
	return exit
}
