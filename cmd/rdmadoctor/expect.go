package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
)

const expectFlagHelp = "judge the host against its class in this expectations file (node classes by host-name glob; format: rdmadoctor expect --help); " +
	"default " + expect.DefaultPath + " on a live host when it exists (with --root only this flag applies)"

// expectFor loads the expectations that judge this run: the --expect file,
// or on a live host the default file (expect.DefaultPath) when it exists. An explicit file that
// cannot be read, does not parse or has no class for hostname is a usage
// error; so is a default file that cannot be read or does not parse. A
// default file with no class for this host is not: a fleet-wide file need
// not cover every node, and the report then says no class judged it.
func expectFor(path string, live bool, hostname string) (*expect.Class, *report.ExpectInfo, error) {
	return expectFrom(path, expect.DefaultPath, live, hostname)
}

// expectFrom is expectFor with the default path given (tests use their own).
func expectFrom(path, defaultPath string, live bool, hostname string) (*expect.Class, *report.ExpectInfo, error) {
	explicit := path != ""
	if !explicit {
		if !live {
			return nil, nil, nil
		}
		path = defaultPath
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
	}
	flag := "--expect"
	if !explicit {
		flag = "expectations (the default file; --expect FILE to choose another)"
	}
	f, err := expect.LoadKnown(path, knownIDs())
	if err != nil {
		return nil, nil, usageError{fmt.Sprintf("%s: %v", flag, err)}
	}
	c, err := checks.ExpectClassFor(f, hostname)
	var pe *expect.ParseError
	switch {
	case err == nil:
		return c, &report.ExpectInfo{File: path, Class: c.Name}, nil
	case !explicit && !errors.As(err, &pe):
		return nil, &report.ExpectInfo{File: path}, nil
	}
	return nil, nil, usageError{fmt.Sprintf("%s: %v", flag, err)}
}

// knownIDs are what an expectations file's skip, fail_on_warn and waive
// may name: the catalog's checks and the declared findings. The file is
// checked against them as it is parsed, so every fault shows at once.
func knownIDs() expect.Known {
	var ids []string
	for _, c := range checks.Catalog() {
		ids = append(ids, c.ID)
	}
	return expect.Known{Checks: ids, Findings: checks.FindingIDs()}
}

// expectFlags are the flags of `rdmadoctor expect`.
type expectFlags struct {
	fromHost bool
	check    string
	root     string
	class    string
	hosts    string
	host     string
	output   string
	timeout  time.Duration
	rootSet  bool // --root was given: --check matches the rules against that host even with --host
}

func newExpectFlagSet(f *expectFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("rdmadoctor expect", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.BoolVar(&f.fromHost, "from-host", false, "write a class from what this host (or --root) shows: a known-good node's values")
	fs.StringVar(&f.check, "check", "", "parse this expectations file and print the class that matches the host")
	fs.StringVar(&f.root, "root", "/", "read this host directory or snapshot .tar.gz instead of the live host")
	fs.StringVar(&f.class, "class", "", "--from-host: the class name (default: the host name without its trailing digits)")
	fs.StringVar(&f.hosts, "hosts", "", "--from-host: the host-name globs of the class, space- or comma-separated (default: the host name, trailing digits replaced by *)")
	fs.StringVar(&f.host, "host", "", "--check: match this host name instead of the host's own")
	fs.StringVarP(&f.output, "output", "o", "", "--from-host: write the file here instead of standard output")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "deadline for reading the host (and unpacking an archive --root)")
	return fs
}

const expectUsage = `rdmadoctor expect — write or check an expectations file: what each class of node must look like

usage:
  rdmadoctor expect --from-host [--root DIR|FILE.tar.gz] [--class NAME] [--hosts GLOBS] [-o FILE]
  rdmadoctor expect --check FILE [--root DIR|FILE.tar.gz | --host NAME]

Run the checks against a file with: rdmadoctor --expect FILE (default %s on a live host).
Review a written file before use: ports that were not ACTIVE are written as commented
"# <dev>/<port>.unused = true" candidates: uncomment those unused on purpose.
--check lists every error with its line, and every device or port rule of the host's
class that matches nothing on the host read (with the nearest name).

The format, version 1 ('#' starts a comment; a later line wins for the same unit and key):

  [class cx5-roce]
  hosts = cx5-node* cx5-spare-??       # globs on the host name (path.Match); the first class that matches judges
  devices = 2                          # RDMA devices the node must have
  skip = counters.errors               # checks not run on this class
  fail_on_warn = ["port.state"]        # these checks' warnings are problems on this class
  roce_tc = 106                        # the traffic class RoCE applications use (DSCP<<2)
  lossless = true                      # PFC/trust/ECN faults fail instead of warn
  mlx5_*.fw = ["16.35.*", "16.36.2000"]  # device keys: <device glob>.fw, pcie_speed, pcie_width, ports;
                                       #   string keys take a glob or a list; fw matches fw_ver's version
  mlx5_*.pcie_speed = 8.0 GT/s PCIe
  mlx5_*.pcie_width = 16
  mlx5_*/1.rate = 100                  # port keys: <device glob>/<port or *>.link_layer, rate, width,
  mlx5_*/1.mtu = 9000                  #   mtu, pfc_priority, unused
  mlx5_1/1.unused = true               # a port unused on purpose: never judged

flags:
%s`

// cmdExpect is `rdmadoctor expect`: exit 0 when the file was written or
// matched, 1 when the host could not be read, --check finds no class or a
// rule of the class matches no device or port of the host read, 2 on a
// usage error or a file that does not parse.
func cmdExpect(args []string, stdout, stderr io.Writer) int {
	f := &expectFlags{}
	fs := newExpectFlagSet(f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, expectUsage, expect.DefaultPath, fs.FlagUsages())
			return 0
		}
		msg := flagError(err, fs)
		fmt.Fprintf(stderr, "rdmadoctor expect: %s\n", msg)
		return report.ExitUsage
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "rdmadoctor expect: %s\n", msg)
		return report.ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q; valid flags: %s", fs.Arg(0), flagNames(fs)))
	case f.fromHost == (f.check != ""):
		return usage("say --from-host (write a file from this host) or --check FILE (which class matches); see rdmadoctor expect --help")
	case f.timeout <= 0:
		return usage(fmt.Sprintf("--timeout %v: want a deadline above 0, such as 1m", f.timeout))
	case f.fromHost && f.host != "":
		return usage("--host goes with --check; --from-host writes the host's own values")
	case f.check != "" && (f.class != "" || f.hosts != "" || f.output != ""):
		return usage("--class, --hosts and -o go with --from-host")
	}
	f.rootSet = fs.Changed("root")
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	if f.check != "" {
		return expectCheck(ctx, f, stdout, stderr)
	}
	return expectFromHost(ctx, f, stdout, stderr)
}

// openExpectHost opens --root and returns the environment and the host
// name the report would show.
func openExpectHost(ctx context.Context, root string) (*checks.Env, string, func(), error) {
	host, cleanup, err := openRootCtx(ctx, root)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--root: %w", err)
	}
	name := host.Hostname()
	if host.Live() && name == "" {
		name, _ = os.Hostname()
	}
	return checks.NewEnv(host, checks.Options{Level: 1}), name, cleanup, nil
}

func expectFromHost(ctx context.Context, f *expectFlags, stdout, stderr io.Writer) int {
	env, hostname, cleanup, err := openExpectHost(ctx, f.root)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
		return report.ExitUsage
	}
	defer cleanup()
	class, hosts := f.class, strings.Fields(strings.ReplaceAll(f.hosts, ",", " "))
	if class == "" || len(hosts) == 0 {
		defClass, defHosts, err := checks.ExpectDefaults(hostname)
		if err != nil {
			fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
			return report.ExitUsage
		}
		class = cmp.Or(class, defClass)
		if len(hosts) == 0 {
			hosts = defHosts
		}
	}
	c, err := checks.ExpectFromHost(env, class, hosts)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
		return report.ExitInternal
	}
	var b bytes.Buffer
	if err := expect.Write(&b, c); err != nil {
		fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
		return report.ExitInternal
	}
	if f.output == "" {
		if _, err := stdout.Write(b.Bytes()); err != nil {
			fmt.Fprintf(stderr, "rdmadoctor expect: write: %v\n", err)
			return report.ExitInternal
		}
	} else if err := os.WriteFile(f.output, b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "rdmadoctor expect: -o: %v\n", err)
		return report.ExitInternal
	} else {
		fmt.Fprintf(stderr, "rdmadoctor expect: wrote class %s (hosts %s) to %s; review it before use\n", c.Name, strings.Join(c.Hosts, " "), f.output)
	}
	if _, err := (&expect.File{Classes: []*expect.Class{c}}).Match(hostname); err != nil && hostname != "" {
		fmt.Fprintf(stderr, "rdmadoctor expect: note: --hosts %s does not match this host's name %q\n", strings.Join(c.Hosts, " "), hostname)
	}
	return 0
}

func expectCheck(ctx context.Context, f *expectFlags, stdout, stderr io.Writer) int {
	file, err := expect.LoadKnown(f.check, knownIDs())
	if err != nil {
		printErrors(stderr, err)
		return report.ExitUsage
	}
	hostname, read := f.host, false
	var units []expect.Unit
	// The rules are matched against the host that was read: this one, or
	// --root. A --host alone names another node, whose devices are not
	// here to match.
	if hostname == "" || f.rootSet {
		env, name, cleanup, err := openExpectHost(ctx, f.root)
		if err != nil {
			fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
			return report.ExitUsage
		}
		units, read = checks.ExpectUnits(env), true
		cleanup()
		hostname = cmp.Or(hostname, name)
	}
	c, err := checks.ExpectClassFor(file, hostname)
	var pe *expect.ParseError
	if errors.As(err, &pe) {
		printErrors(stderr, err)
		return report.ExitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor expect: %v\n", err)
		return report.ExitInternal
	}
	fmt.Fprintf(stdout, "%s: %d class(es); host %s is class %s (line %d): %d device rule(s), %d port rule(s)\n",
		f.check, len(file.Classes), hostname, c.Name, c.Line, len(c.DeviceRules), len(c.PortRules))
	if !read {
		fmt.Fprintf(stdout, "rules not matched against devices: give --root with a snapshot of %s to check them\n", hostname)
		return 0
	}
	// A rule that matches nothing here is a mistake in the file (a typo
	// in a device glob): a run only warns of it, a check of the file
	// refuses it.
	un := c.Unmatched(units)
	for _, u := range un {
		fmt.Fprintf(stderr, "rdmadoctor expect: %s\n", u.Error())
	}
	if len(un) > 0 {
		return report.ExitInternal
	}
	return 0
}

// printErrors prints an error, one line for each of the faults it holds
// (a file's every parse error).
func printErrors(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "rdmadoctor expect: %s\n", line)
	}
}
