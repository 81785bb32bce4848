// Command probecli runs the verbs probes without the rest of rdmadoctor:
// a tool for trying the binding on a real stack.
//
//	probecli enumerate [-lib PATH]
//	probecli run -device rxe0 [-ports 1,2] [-timeout 5s] [-size 1024] [-iterations 1000]
//	             [-probes LIST] [-cuda LIB] [-hip LIB] [-hsa LIB]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
		os.Exit(probe.ChildMain(os.Args[2:]))
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probecli enumerate|run [flags]")
		os.Exit(2)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	lib := fs.String("lib", "", "libibverbs to open")
	device := fs.String("device", "", "device to probe")
	ports := fs.String("ports", "1", "ports, comma separated")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline per port")
	size := fs.Int("size", 1024, "bytes per SEND")
	iters := fs.Int("iterations", 1000, "timed round trips")
	budget := fs.Duration("budget", time.Second, "time budget of the timed round trips")
	probes := fs.String("probes", "", "probes to run, comma separated (default all)")
	cuda := fs.String("cuda", "", "libcuda to open for probe.gpu_memory (default libcuda.so.1)")
	hip := fs.String("hip", "", "HIP runtime to open for probe.gpu_memory (default libamdhip64.so)")
	hsa := fs.String("hsa", "", "HSA runtime for the AMD dma-buf export (default libhsa-runtime64.so.1)")
	fs.Parse(os.Args[2:])
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	switch os.Args[1] {
	case "enumerate":
		en, err := probe.Enumerate(context.Background(), exe, *lib, *timeout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "enumerate:", err)
		}
		enc.Encode(en)
		if err != nil {
			os.Exit(1)
		}
	case "run":
		var ps []int
		for _, f := range strings.Split(*ports, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				fmt.Fprintln(os.Stderr, "bad -ports:", err)
				os.Exit(2)
			}
			ps = append(ps, n)
		}
		opts := probe.Options{Library: *lib, Timeout: *timeout, Size: *size, Iterations: *iters, IterationBudget: *budget,
			GPULibraries: gpu.Libraries{CUDA: *cuda, HIP: *hip, HSA: *hsa}}
		if *probes != "" {
			opts.Probes = strings.Split(*probes, ",")
		}
		res := probe.Run(context.Background(), exe, []probe.Target{{Device: *device, Ports: ps}}, opts)
		enc.Encode(res)
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
