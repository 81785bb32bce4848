package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// The bash script, sourced into bash, completes what an operator types.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, _ := runCLI(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, c := range []struct {
		line string // the words typed, the last one under the cursor
		want string
	}{
		{"rdmadoctor li", "list"},
		{"rdmadoctor --check limits.m", "limits.memlock"},
		{"rdmadoctor --skip pci.", "pci.device pci.link"},
		{"rdmadoctor explain peer.rdma_", "peer.rdma_write peer.rdma_read peer.rdma_cm"},
		{"rdmadoctor --format p", "prometheus"},
		{"rdmadoctor --level 2 --fail", "--fail-on"},
		{"rdmadoctor help exit", "exit-codes"},
		{"rdmadoctor completion f", "fish"},
		{"rdmadoctor slurm h", "healthcheck"},
		{"rdmadoctor --timeout ", ""},
		{"rdmadoctor explain port.state/no-lin", "port.state/no-link"},
		{"rdmadoctor explain port.sta", "port.state"}, // its findings once a "/" is typed
		// A subcommand's own flags, their values, and the run's flags
		// where the subcommand takes them.
		{"rdmadoctor slurm --dry", "--dry-run"},
		{"rdmadoctor slurm healthcheck --budg", "--budget"},
		{"rdmadoctor slurm healthcheck --lev", "--level"},
		{"rdmadoctor slurm prolog --form", ""}, // slurm refuses --format
		{"rdmadoctor slurm prolog --check pci.l", "pci.link"},
		{"rdmadoctor npd --probl", "--problem-only"},
		{"rdmadoctor npd --run --lev", ""}, // npd --run is level 1
		{"rdmadoctor list --format ", "text json"},
		{"rdmadoctor inventory --f", "--format"},
		{"rdmadoctor summarize --format j", "json"},
		{"rdmadoctor peer test --it", "--iterations"},
		{"rdmadoctor peer serve --insec", "--insecure-no-token"},
		{"rdmadoctor snapshot --red", "--redact"},
		{"rdmadoctor expect --class ", ""},
		{"rdmadoctor ack counters.errors --rea", "--reason"},
	} {
		words := strings.Fields(c.line)
		if strings.HasSuffix(c.line, " ") {
			words = append(words, "")
		}
		if got := bashComplete(t, bash, script, words); got != c.want {
			t.Errorf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
}

// bashComplete runs the completion function on the words typed, the last
// under the cursor, and returns what it offers.
func bashComplete(t *testing.T, bash, script string, words []string) string {
	t.Helper()
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
		itoa(len(words)-1) + "; _rdmadoctor; echo \"${COMPREPLY[*]}\"\n"
	out, err := exec.Command(bash, "--norc", "-c", prog).Output()
	if err != nil {
		t.Fatalf("%q: %v", words, err)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// Every flag a --help shows is completed after that command: `rdmadoctor
// slurm healthcheck --<TAB>` offers what `slurm healthcheck --help` lists.
func TestCompletionOffersEveryHelpFlag(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	_, script, _ := runCLI(t, "completion", "bash")
	for cmd, flags := range helpFlags(t) {
		words := append(append([]string{"rdmadoctor"}, strings.Fields(cmd)...), "--")
		offered := " " + bashComplete(t, bash, script, words) + " "
		for _, f := range flags {
			if !strings.Contains(offered, " --"+f+" ") {
				t.Errorf("rdmadoctor %s --<TAB> does not offer --%s (its --help shows it); offered:%s", cmd, f, offered)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestCompletionShells(t *testing.T) {
	code, zsh, _ := runCLI(t, "completion", "zsh")
	_, bash, _ := runCLI(t, "completion", "bash")
	if code != 0 || !strings.HasPrefix(zsh, "#compdef rdmadoctor\n") || !strings.HasSuffix(zsh, bash) {
		t.Errorf("zsh: exit %d\n%s", code, zsh)
	}
	code, fish, _ := runCLI(t, "completion", "fish")
	for _, line := range []string{
		"complete -c rdmadoctor -n __fish_use_subcommand -a list -d 'the catalog: code, id, level, title'\n",
		"complete -c rdmadoctor -n __fish_use_subcommand -l format -x -a 'text json prometheus' -d 'report format'\n",
		"complete -c rdmadoctor -n __fish_use_subcommand -l root -r -F -d 'read this host directory or snapshot .tar.gz instead of the live host'\n",
		"complete -c rdmadoctor -n __fish_use_subcommand -l timeout -x -d 'deadline for the whole run'\n",
		"complete -c rdmadoctor -n '__fish_seen_subcommand_from peer' -a 'serve test'\n",
	} {
		if code != 0 || !strings.Contains(fish, line) {
			t.Errorf("fish script lacks %q", line)
		}
	}
	code, out, errOut := runCLI(t, "completion", "bahs")
	if code != report.ExitUsage || out != "" || errOut != "rdmadoctor completion: unknown shell \"bahs\"; did you mean bash?; valid: bash, zsh, fish\n" {
		t.Errorf("completion bahs: exit %d, %q", code, errOut)
	}
}
