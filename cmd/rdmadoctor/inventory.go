package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

type inventoryFlags struct {
	root    string
	format  string
	timeout time.Duration
}

func newInventoryFlagSet(f *inventoryFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("rdmadoctor inventory", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.StringVar(&f.root, "root", "/", "read this host directory or snapshot .tar.gz instead of the live host")
	fs.StringVar(&f.format, "format", "text", "text, or json (the inventory the report carries)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "deadline (covers unpacking an archive --root)")
	return fs
}

// cmdInventory is `rdmadoctor inventory`: what the host has, judged by
// nothing — the view of ibv_devinfo and ibstat an operator reads first.
// Exit 0 when it could be read (an empty host too: that is data), 1 when
// it could not be written, 2 on a usage error.
func cmdInventory(args []string, stdout, stderr io.Writer) int {
	f := &inventoryFlags{}
	fs := newInventoryFlagSet(f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "rdmadoctor inventory — the RDMA devices, ports, GIDs and netdevs of this host, as ibv_devinfo and ibstat show them, and on InfiniBand each port's SM, neighbour and P_Key table\n\n"+
				"usage: rdmadoctor inventory [--root DIR|FILE.tar.gz] [--format text|json]\n\nflags:\n%s", fs.FlagUsages())
			return 0
		}
		msg := flagError(err, fs)
		fmt.Fprintf(stderr, "rdmadoctor inventory: %s\n", msg)
		return report.ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "rdmadoctor inventory: unexpected argument %q; valid flags: %s\n", fs.Arg(0), flagNames(fs))
		return report.ExitUsage
	case f.format != "text" && f.format != "json":
		fmt.Fprintf(stderr, "rdmadoctor inventory: --format %q: unknown format; valid formats: text, json\n", f.format)
		return report.ExitUsage
	case f.timeout <= 0:
		fmt.Fprintln(stderr, "rdmadoctor inventory: --timeout must be positive")
		return report.ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	host, cleanup, err := openRootCtx(ctx, f.root)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor inventory: --root: %v\n", err)
		if ctx.Err() != nil {
			return report.ExitInternal
		}
		return report.ExitUsage
	}
	defer cleanup()

	env := checks.NewEnv(host, checks.Options{Level: 1})
	r := &report.InventoryReport{Schema: report.InventorySchema, Version: version, Inventory: checks.Inventory(env)}
	r.Host.Root = f.root
	r.Host.Hostname = host.Hostname()
	if host.Live() && r.Host.Hostname == "" {
		r.Host.Hostname, _ = os.Hostname()
	}
	r.Host.Kernel, _ = host.KernelRelease()
	r.IBFabric, r.IBFabricUnavailable = checks.InventoryIBFabric(ctx, host)
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = writeText(stdout, func(w io.Writer) error { return report.WriteInventoryText(w, r, textWidth(stdout)) })
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor inventory: write: %v\n", err)
		return report.ExitInternal
	}
	return 0
}
