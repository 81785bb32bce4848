package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// subcommand is one word rdmadoctor dispatches on: how it is called and
// what it does, as `--help` and `help` list it.
type subcommand struct {
	name, synopsis, summary string
	// words are the subcommand's own subcommands (slurm healthcheck).
	words []string
}

// subcommands are every subcommand, in the order `--help` lists them.
var subcommands = []subcommand{
	{"list", "list [--format text|json]", "the catalog: code, id, level, title", nil},
	{"explain", "explain ID|CODE|FINDING", "what a check judges, why, every finding and its fix; or one finding", nil},
	{"inventory", "inventory", "the devices, ports, addresses and GID indexes, as ibv_devinfo shows them", nil},
	{"snapshot", "snapshot -o FILE", "capture this host's RDMA state for --root elsewhere (snapshot --help)", nil},
	{"expect", "expect --from-host", "write an expectations file from a known-good host (expect --help)", nil},
	{"slurm", "slurm healthcheck|prolog", "run the checks and drain or resume this Slurm node (slurm --help)", []string{"healthcheck", "prolog"}},
	{"npd", "npd", "node-problem-detector plugin: one line from the --state records (npd --help)", nil},
	{"ack", "ack CHECK --reason TEXT", "accept a check's present counter levels as the new baseline (ack --help)", nil},
	{"summarize", "summarize DIR|FILE...", "one view of many nodes' JSON reports (summarize --help)", nil},
	{"peer", "peer serve|test", "RDMA between two hosts: lend this port, or test the path to peers (peer --help)", []string{"serve", "test"}},
	{"help", "help [COMMAND|exit-codes]", "this help, a command's help, or the exit codes", nil},
	{"version", "version", "version, commit, Go version, and the libibverbs.so.1 the loader would use", nil},
	{"completion", "completion bash|zsh|fish", "a shell completion script for subcommands, flags and check IDs", []string{"bash", "zsh", "fish"}},
}

// subcommandNames are the subcommands' names, in listing order.
func subcommandNames() []string {
	var names []string
	for _, s := range subcommands {
		names = append(names, s.name)
	}
	return names
}

func findSubcommand(name string) (subcommand, bool) {
	for _, s := range subcommands {
		if s.name == name {
			return s, true
		}
	}
	return subcommand{}, false
}

// exitCodes is the one table of exit codes: `help exit-codes` prints it,
// and so does the footer of `--help`.
var exitCodes = [][2]string{
	{fmt.Sprint(report.ExitOK), "healthy: every check that ran passed (warnings count only with --fail-on warn)"},
	{fmt.Sprint(report.ExitInternal), "internal error, or the run did not finish (--timeout passed, a report or state could not be written)"},
	{fmt.Sprint(report.ExitUsage), "usage: a bad subcommand, flag, argument, or file named on the command line"},
	{fmt.Sprint(ExitBusy), "another run holds the --state lock; nothing was checked"},
	{fmt.Sprint(report.ExitUnknown), "unknown: a check could not look; root_cause names it"},
	{"10-125", "a problem: the root cause's own code (rdmadoctor list; rdmadoctor explain CODE)"},
	{"128+N", "stopped by signal N (130: SIGINT, 143: SIGTERM); the report is partial"},
}

// writeExitCodes prints the exit code table.
func writeExitCodes(w io.Writer) {
	fmt.Fprintf(w, "exit codes:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(w, "  %-7s %s\n", e[0], e[1])
	}
}

// cmdHelp is `rdmadoctor help [COMMAND [WORD]|exit-codes]`.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stdout)
		return 0
	}
	if args[0] == "--help" || args[0] == "-h" {
		args = []string{"help"}
	}
	if args[0] == "exit-codes" {
		writeExitCodes(stdout)
		fmt.Fprintln(stdout, "\nthe verdicts behind them, and what each adapter does with them: docs/verdict.md")
		return 0
	}
	s, ok := findSubcommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "rdmadoctor: help: unknown command %q%s; valid: %s, exit-codes\n",
			args[0], didYouMean(args[0], append(subcommandNames(), "exit-codes")), strings.Join(subcommandNames(), ", "))
		return report.ExitUsage
	}
	if s.name == "help" {
		fmt.Fprintf(stdout, "usage: rdmadoctor %s\n  %s\n\n", s.synopsis, s.summary)
		writeExitCodes(stdout)
		return 0
	}
	// A command's help is its own --help: one text, wherever it is asked.
	words := append([]string{s.name}, args[1:min(len(args), 2)]...)
	return run(append(words, "--help"), stdout, stderr)
}

func printUsage(w io.Writer) {
	fs := newFlagSet(&flags{})
	fmt.Fprintf(w, "rdmadoctor %s — does this host's RDMA stack work, what is broken first, and how to fix it\n\n", version)
	fmt.Fprintf(w, "usage:\n  %-36s %s\n", "rdmadoctor [flags]", "run the checks (exit codes below)")
	for _, s := range subcommands {
		fmt.Fprintf(w, "  %-36s %s\n", "rdmadoctor "+s.synopsis, s.summary)
	}
	fmt.Fprintf(w, "\nflags:\n%s\n", fs.FlagUsages())
	writeExitCodes(w)
	fmt.Fprintln(w, "\nrdmadoctor help COMMAND: a command's flags; rdmadoctor help exit-codes: the table above")
}
