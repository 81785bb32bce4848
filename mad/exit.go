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

// simulatorExit is the C library's exit when libumad2sim.so is loaded in
// this process, 0 otherwise.
func simulatorExit() uintptr {
	if sim, err := purego.Dlsym(purego.RTLD_DEFAULT, "sim_client_exit"); err != nil || sim == 0 {
		return 0
	}
	exit, err := purego.Dlsym(purego.RTLD_DEFAULT, "exit")
	if err != nil {
		return 0
	}
	return exit
}
