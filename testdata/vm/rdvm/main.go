// Command rdvm is the helper of the SoftRoCE VM harness (testdata/vm). Its
// guest commands run inside the VM where busybox falls short; its host
// commands unpack what the guest sent over the serial console and judge it.
//
// Guest:
//
//	rdvm time -n N -o FILE -- CMD...        run CMD N times, write each run's ns
//	rdvm runas --user UID --memlock KIB -- CMD...
//	                                        run CMD unprivileged, with RLIMIT_MEMLOCK
//	rdvm killprobe --out DIR -- CMD...      SIGKILL CMD's child while it holds verbs resources
//
// Host:
//
//	rdvm collect CONSOLE DIR                unpack the console's records into DIR
//	rdvm verify [flags] DIR                 assert every scenario record in DIR
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	code := 0
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "time":
		err = cmdTime(args)
	case "runas":
		code, err = cmdRunAs(args)
	case "killprobe":
		err = cmdKillProbe(args)
	case "collect":
		err = cmdCollect(args)
	case "verify":
		code, err = cmdVerify(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdvm %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rdvm time|runas|killprobe|collect|verify ... (see the package comment)")
	os.Exit(2)
}

// splitDashDash splits args at the first "--" into flags and a command.
func splitDashDash(args []string) (flags, cmd []string, err error) {
	for i, a := range args {
		if a == "--" {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("no command after --")
			}
			return args[:i], args[i+1:], nil
		}
	}
	return nil, nil, fmt.Errorf("no -- before the command")
}
