package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

const completionUsage = `usage: rdmadoctor completion bash|zsh|fish
  a completion script for subcommands, each command's flags and their values, and check and finding IDs
  bash:  source <(rdmadoctor completion bash)   or save it as /usr/share/bash-completion/completions/rdmadoctor
  zsh:   rdmadoctor completion zsh > "${fpath[1]}/_rdmadoctor"
  fish:  rdmadoctor completion fish > ~/.config/fish/completions/rdmadoctor.fish
`

// completionWords is what the scripts complete, read from the flag set
// and the catalog so that they never fall behind either.
type completionWords struct {
	commands []string
	flags    []*pflag.Flag
	checks   []string
	// findings are the finding IDs explain takes: offered once the word
	// has a "/", so that a check's ID completes to itself first.
	findings []string
	// values are the fixed choices of a flag, or of the word after a
	// subcommand; a flag that takes a value without choices completes files.
	values map[string][]string
}

func newCompletionWords() completionWords {
	w := completionWords{commands: subcommandNames(), checks: allCheckIDs(), findings: checks.FindingIDs(), values: map[string][]string{
		"--format": {"text", "json", "prometheus"}, "--level": {"1", "2"}, "--fail-on": {"fail", "warn"},
		"--check": checksOnly(), "--skip": checksOnly(), "explain": allCheckIDs(), "ack": checksOnly(),
		"help": append(subcommandNames(), "exit-codes"),
	}}
	for _, s := range subcommands {
		if len(s.words) > 0 {
			w.values[s.name] = s.words
		}
	}
	newFlagSet(&flags{}).VisitAll(func(f *pflag.Flag) { w.flags = append(w.flags, f) })
	return w
}

func checksOnly() []string {
	var ids []string
	for _, id := range allCheckIDs() {
		if !strings.HasPrefix(id, "peer.") {
			ids = append(ids, id)
		}
	}
	return ids
}

// flagWords are the run's flags as typed: --name and -x.
func (w completionWords) flagWords() []string {
	var out []string
	for _, f := range w.flags {
		out = append(out, "--"+f.Name)
		if f.Shorthand != "" {
			out = append(out, "-"+f.Shorthand)
		}
	}
	return out
}

func cmdCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(stdout, completionUsage)
		return 0
	}
	shells := []string{"bash", "zsh", "fish"}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "rdmadoctor completion: name one shell: %s\n", strings.Join(shells, ", "))
		return report.ExitUsage
	}
	w := newCompletionWords()
	switch args[0] {
	case "bash":
		io.WriteString(stdout, w.bash())
	case "zsh":
		io.WriteString(stdout, "#compdef rdmadoctor\n# rdmadoctor completion zsh: the bash completion through zsh's bashcompinit\nautoload -U +X bashcompinit && bashcompinit\n"+w.bash())
	case "fish":
		io.WriteString(stdout, w.fish())
	default:
		fmt.Fprintf(stderr, "rdmadoctor completion: unknown shell %q%s; valid: %s\n", args[0], didYouMean(args[0], shells), strings.Join(shells, ", "))
		return report.ExitUsage
	}
	return 0
}

// bash is the bash script: the word before the cursor decides (a flag's
// value, a subcommand's word), then the first word (a subcommand), then
// the run's flags; anything else completes files.
func (w completionWords) bash() string {
	var b strings.Builder
	b.WriteString("# rdmadoctor completion bash\n_rdmadoctor() {\n")
	b.WriteString("    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n")
	b.WriteString(w.bashSubcommands())
	b.WriteString("    case \"$prev\" in\n")
	keys := make([]string, 0, len(w.values))
	for k := range w.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "explain" {
			fmt.Fprintf(&b, "    explain) if [[ $cur == */* ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); else COMPREPLY=($(compgen -W %q -- \"$cur\")); fi; return ;;\n",
				strings.Join(w.findings, " "), strings.Join(w.values[k], " "))
			continue
		}
		fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", k, strings.Join(w.values[k], " "))
	}
	var fileFlags, valueFlags []string
	for _, f := range w.flags {
		switch t := f.Value.Type(); {
		case t == "bool" || w.values["--"+f.Name] != nil:
		case t == "string":
			fileFlags = append(fileFlags, "--"+f.Name)
		default:
			valueFlags = append(valueFlags, "--"+f.Name) // a number or a duration
		}
	}
	fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", strings.Join(fileFlags, "|"))
	fmt.Fprintf(&b, "    %s) COMPREPLY=(); return ;;\n    esac\n", strings.Join(valueFlags, "|"))
	fmt.Fprintf(&b, "    if [[ $COMP_CWORD -eq 1 && $cur != -* ]]; then\n        COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n    fi\n", strings.Join(w.commands, " "))
	fmt.Fprintf(&b, "    if [[ $cur == -* && ${COMP_WORDS[1]} == -* ]]; then\n        COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n    fi\n", strings.Join(append(w.flagWords(), "--help"), " "))
	b.WriteString("    COMPREPLY=($(compgen -f -- \"$cur\"))\n}\ncomplete -F _rdmadoctor rdmadoctor\n")
	return b.String()
}

// fish is the fish script: subcommands first, the run's flags with their
// choices, and each subcommand's words.
func (w completionWords) fish() string {
	var b strings.Builder
	b.WriteString("# rdmadoctor completion fish\ncomplete -c rdmadoctor -f\n")
	for _, s := range subcommands {
		fmt.Fprintf(&b, "complete -c rdmadoctor -n __fish_use_subcommand -a %s -d %s\n", s.name, fishQuote(s.summary))
	}
	for _, f := range w.flags {
		b.WriteString(w.fishRunFlag("__fish_use_subcommand", f))
	}
	b.WriteString(w.fishSubcommands())
	for _, s := range append([]string{"explain", "ack", "help"}, "slurm", "peer", "completion") {
		words := w.values[s]
		if s == "explain" {
			words = append(append([]string{}, words...), w.findings...)
		}
		fmt.Fprintf(&b, "complete -c rdmadoctor -n '__fish_seen_subcommand_from %s' -a %s\n", s, fishQuote(strings.Join(words, " ")))
	}
	return b.String()
}

// fishRunFlag is the fish line of one of the run's flags, offered where
// the condition holds.
func (w completionWords) fishRunFlag(cond string, f *pflag.Flag) string {
	line := fmt.Sprintf("complete -c rdmadoctor -n %s -l %s", cond, f.Name)
	if f.Shorthand != "" {
		line += " -s " + f.Shorthand
	}
	switch choices := w.values["--"+f.Name]; {
	case choices != nil:
		line += " -x -a " + fishQuote(strings.Join(choices, " "))
	case f.Value.Type() == "string":
		line += " -r -F"
	case f.Value.Type() != "bool":
		line += " -x"
	}
	return line + " -d " + fishQuote(firstSentence(f.Usage)) + "\n"
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// firstSentence is a flag's usage up to its first colon or semicolon.
func firstSentence(s string) string {
	if i := strings.IndexAny(s, ";:("); i > 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
