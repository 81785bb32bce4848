package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The help and the documentation describe one CLI: every flag and
// subcommand the help shows is documented, every rdmadoctor command line
// the documentation shows uses only flags and subcommands the help has,
// and every transcript in the documentation is what the command prints.

// helpFlagRE is a flag as a --help text defines it, at the start of an
// indented line: "  -o, --output string", "      --dry-run", "  --state FILE".
var helpFlagRE = regexp.MustCompile(`(?m)^[ \t]+(?:-[a-zA-Z], )?--([a-z][a-z0-9-]*)`)

// helpFlags are the flags of each help text the CLI prints, by the command
// that prints it: "" for the run's, "slurm", "peer serve", ….
func helpFlags(t *testing.T) map[string][]string {
	t.Helper()
	cmds := [][]string{nil}
	for _, s := range subcommands {
		cmds = append(cmds, []string{s.name})
		if s.name == "completion" {
			continue // its words are shells
		}
		for _, w := range s.words {
			cmds = append(cmds, []string{s.name, w})
		}
	}
	out := map[string][]string{}
	for _, c := range cmds {
		code, text, errOut := runCLI(t, append(append([]string{}, c...), "--help")...)
		if code != 0 || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", strings.Join(c, " "), code, errOut)
		}
		name := strings.Join(c, " ")
		for _, m := range helpFlagRE.FindAllStringSubmatch(text, -1) {
			out[name] = append(out[name], m[1])
		}
	}
	return out
}

// docsCorpus is README.md, every page under docs/ and the man pages (their
// "\-" read as "-"), by path from the repository root.
func docsCorpus(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range docPages(t) {
		out[p] = readDoc(t, p)
	}
	mans, err := filepath.Glob("../../docs/man/*.[0-9]")
	if err != nil || len(mans) == 0 {
		t.Fatalf("no man pages under docs/man (%v)", err)
	}
	for _, m := range mans {
		name := "docs/man/" + filepath.Base(m)
		out[name] = strings.ReplaceAll(readDoc(t, name), `\-`, "-")
	}
	return out
}

// mentions reports whether text names word as a whole: not as part of a
// longer flag or name ("--state" is not in "--state-dir").
func mentions(text, word string) bool {
	re := regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(word) + `($|[^a-z0-9-])`)
	return re.MatchString(text)
}

// TestHelpIsDocumented: every flag of every --help, and every subcommand
// and its words, appear in the documentation (docs/*.md, README.md or a
// man page).
func TestHelpIsDocumented(t *testing.T) {
	var all strings.Builder
	for _, text := range docsCorpus(t) {
		all.WriteString(text + "\n")
	}
	docs := all.String()
	for cmd, flags := range helpFlags(t) {
		for _, f := range flags {
			if !mentions(docs, "--"+f) {
				t.Errorf("rdmadoctor %s --help shows --%s; no page of docs/ (nor README.md, nor a man page) mentions it", cmd, f)
			}
		}
	}
	for _, s := range subcommands {
		if !mentions(docs, "rdmadoctor "+s.name) {
			t.Errorf("the subcommand %s is not documented (no \"rdmadoctor %s\" in docs/ or README.md)", s.name, s.name)
		}
		for _, w := range s.words {
			// "slurm prolog", or one of "slurm healthcheck|prolog".
			re := regexp.MustCompile(`(^|[^a-z0-9-])` + s.name + ` (?:[a-z-]+\\?\|)*` + w + `($|[^a-z0-9-])`)
			if !re.MatchString(docs) {
				t.Errorf("%s %s is not documented", s.name, w)
			}
		}
	}
}

var (
	// docCommandRE is an rdmadoctor command line in the documentation:
	// "rdmadoctor" as a word of its own (not rdmadoctor-sweep, not
	// cmd/rdmadoctor/…) and what follows it on the line.
	docCommandRE = regexp.MustCompile(`(?:^|[\s/=(])rdmadoctor(?:$|\s+(.*))`)
	docFlagRE    = regexp.MustCompile(`(?:^|[\s\[|(])--([a-z][a-z0-9-]*)`)
	firstWordRE  = regexp.MustCompile(`^([a-z][a-z-]*)(?:$|[\s|])`)
)

// docCommands are the rdmadoctor command lines of a page: in its code
// blocks and its code spans (prose that names the program is not one), by
// line number.
func docCommands(text string) map[int][]string {
	out := map[int][]string{}
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		// In a block, what follows two blanks or " # " is a comment on
		// the command (docs/commands.md's list of commands), not part of it.
		cmdPart, _, _ := strings.Cut(l, "  ")
		cmdPart, _, _ = strings.Cut(cmdPart, " # ")
		frags := []string{cmdPart}
		if !fenced {
			frags = nil
			for _, span := range codeSpanRE.FindAllString(l, -1) {
				frags = append(frags, strings.Trim(span, "`"))
			}
		}
		for _, f := range frags {
			if m := docCommandRE.FindStringSubmatch(f); m != nil {
				out[i+1] = append(out[i+1], m[1])
			}
		}
	}
	return out
}

// TestDocumentedCommandsExist: every rdmadoctor command line shown in
// README.md and docs/*.md names a subcommand that exists and only flags
// its --help has (a run's flags for the run, slurm and npd --run, which
// take them too).
func TestDocumentedCommandsExist(t *testing.T) {
	flags := helpFlags(t)
	allowed := map[string]map[string]bool{}
	add := func(cmd string, from ...string) {
		set := map[string]bool{"help": true}
		for _, f := range from {
			for _, fl := range flags[f] {
				set[fl] = true
			}
		}
		allowed[cmd] = set
	}
	add("", "")
	for _, s := range subcommands {
		from := []string{s.name}
		for _, w := range s.words {
			from = append(from, s.name+" "+w)
		}
		if s.name == "slurm" || s.name == "npd" {
			from = append(from, "") // the run's flags apply
		}
		add(s.name, from...)
	}
	pages := docsCorpus(t)
	names := make([]string, 0, len(pages))
	for p := range pages {
		if !strings.HasPrefix(p, "docs/man/") { // generated from the flag sets
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, page := range names {
		for line, cmds := range docCommands(pages[page]) {
			for _, rest := range cmds {
				cmd := ""
				if m := firstWordRE.FindStringSubmatch(rest); m != nil {
					if _, ok := allowed[m[1]]; !ok {
						t.Errorf("%s:%d: rdmadoctor %s: no such subcommand (rdmadoctor help lists them)", page, line, m[1])
						continue
					}
					cmd = m[1]
				}
				for _, m := range docFlagRE.FindAllStringSubmatch(rest, -1) {
					if !allowed[cmd][m[1]] {
						t.Errorf("%s:%d: rdmadoctor %s: --%s is not a flag of %q's --help", page, line, strings.TrimSpace(cmd), m[1], strings.TrimSpace("rdmadoctor "+cmd))
					}
				}
			}
		}
	}
}

// flagsTableRE is a row of docs/commands.md's table of the run's flags:
// "| `--level 1\|2` | …" or "| `--output FILE`, `-o` | …".
var flagsTableRE = regexp.MustCompile("(?m)^\\| `--([a-z][a-z0-9-]*)")

// TestFlagsTableIsTheRunsFlags: docs/commands.md's table of flags lists
// exactly the run's flags, in the order --help shows them.
func TestFlagsTableIsTheRunsFlags(t *testing.T) {
	section := readDoc(t, "docs/commands.md")
	start := strings.Index(section, "\n## Flags\n")
	if start < 0 {
		t.Fatal("docs/commands.md has no ## Flags section")
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var table []string
	for _, m := range flagsTableRE.FindAllStringSubmatch(section, -1) {
		table = append(table, m[1])
	}
	help := helpFlags(t)[""]
	if fmt.Sprint(table) != fmt.Sprint(help) {
		t.Errorf("docs/commands.md's flags table lists\n%v\nrdmadoctor --help shows\n%v", table, help)
	}
}

// transcript is a fenced block of the documentation that opens with
// "$ COMMAND": the command, and the output the page shows for it.
type transcript struct {
	page    string
	line    int    // of the "$ " line
	notRun  string // why the page does not run it: <!-- not run: WHY --> above the block
	command string
	shown   []string
}

var notRunRE = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// transcripts are the transcripts of a page.
func transcripts(page, text string) []transcript {
	var out []transcript
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		if i+1 < j && strings.HasPrefix(lines[i+1], "$ ") {
			tr := transcript{page: page, line: i + 2, command: lines[i+1][2:], shown: lines[i+2 : j]}
			for k := i - 1; k >= 0 && k >= i-2; k-- {
				if m := notRunRE.FindStringSubmatch(strings.TrimSpace(lines[k])); m != nil {
					tr.notRun = m[1]
				}
			}
			out = append(out, tr)
		}
		i = j
	}
	return out
}

// showExitSuffix ends a transcript's command whose exit code the page shows
// as the output's last line.
const showExitSuffix = `; echo "exit code: $?"`

// TestDocsTranscripts runs every transcript of README.md and docs/*.md —
// "$ rdmadoctor ARGS" against the bundled hosts (testdata/hosts/NAME) — in
// the repository root and compares what it prints, stdout and stderr as a
// terminal shows them, with what the page shows: line by line, up to a
// line "…" that stands for the rest. A command ending in
// `; echo "exit code: $?"` shows its exit code as the last line. A
// transcript that cannot run here says why above it:
// <!-- not run: WHY -->.
func TestDocsTranscripts(t *testing.T) {
	var all []transcript
	for _, page := range docPages(t) {
		all = append(all, transcripts(page, readDoc(t, page))...)
	}
	if len(all) < 4 {
		t.Fatalf("only %d transcripts in the documentation: the parser lost them", len(all))
	}
	t.Chdir("../..")
	t.Setenv("NO_COLOR", "1")
	t.Setenv("COLUMNS", "") // the default width, as in a pipe
	for _, tr := range all {
		t.Run(fmt.Sprintf("%s:%d", tr.page, tr.line), func(t *testing.T) {
			if tr.notRun != "" {
				t.Skipf("not run: %s", tr.notRun)
			}
			got := runTranscript(t, tr)
			checkShown(t, tr, got)
		})
	}
}

// runTranscript runs a transcript's command in this process and returns
// its output as lines.
func runTranscript(t *testing.T, tr transcript) []string {
	t.Helper()
	command, showExit := strings.CutSuffix(tr.command, showExitSuffix)
	if strings.ContainsAny(command, "'\"|<>;&$`*?") {
		t.Fatalf("%q: more shell than a transcript runs (one rdmadoctor command, optionally with %s); mark it <!-- not run: WHY -->", tr.command, showExitSuffix)
	}
	args := strings.Fields(command)
	for len(args) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(args[0]) {
		k, v, _ := strings.Cut(args[0], "=")
		t.Setenv(k, v)
		args = args[1:]
	}
	if len(args) == 0 || args[0] != "rdmadoctor" {
		t.Fatalf("%q does not run rdmadoctor", tr.command)
	}
	if len(args) > 1 && args[1] == "slurm" && scontrolInstalled() {
		t.Skip("scontrol is installed here: the transcript shows a host without it")
	}
	var out bytes.Buffer
	code := run(args[1:], &out, &out)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if showExit {
		lines = append(lines, fmt.Sprintf("exit code: %d", code))
	}
	return lines
}

// checkShown compares what a transcript printed with what its page shows.
func checkShown(t *testing.T, tr transcript, got []string) {
	t.Helper()
	for i, want := range tr.shown {
		if want == "…" {
			return // the page leaves out the rest
		}
		if i >= len(got) {
			t.Errorf("%s:%d: the page shows more than %q prints; from line %d: %q", tr.page, tr.line+1+i, tr.command, i+1, want)
			return
		}
		if strings.TrimRight(got[i], " ") != want {
			t.Errorf("%s:%d: %q prints\n%s\nthe page shows\n%s\n(paste the output again)", tr.page, tr.line+1+i, tr.command, got[i], want)
			return
		}
	}
	if len(got) > len(tr.shown) {
		t.Errorf("%s:%d: %q prints %d more lines than the page shows (end the block with a line … to leave them out): %q",
			tr.page, tr.line, tr.command, len(got)-len(tr.shown), got[len(tr.shown)])
	}
}

// scontrolInstalled reports whether slurm's search for scontrol finds one.
func scontrolInstalled() bool {
	for _, d := range []string{"/usr/bin", "/usr/local/bin", "/opt/slurm/bin"} {
		if fi, err := os.Stat(filepath.Join(d, "scontrol")); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// The man pages render without a warning (groff -ww, as man -l renders
// them).
func TestManPagesRender(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff is not installed")
	}
	for name := range generatedDocs {
		if !strings.HasPrefix(name, "docs/man/") {
			continue
		}
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", filepath.Join("../..", name))
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v\n%s", name, err, out)
		}
	}
}
