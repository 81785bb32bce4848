package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// subFlag is a flag of a subcommand, read from the subcommand's --help:
// the help is what a person reads, so completion offers exactly that.
type subFlag struct {
	name, short string
	// takes is what follows the flag: "" for a switch, "file" for a path,
	// "value" for a number, a duration or free text.
	takes   string
	choices []string // the fixed values, when there are
	usage   string
}

// subFlagLineRE is a flag line of a --help: pflag's
// "  -o, --output string   write …", "      --dry-run[=true|false]   print …",
// or a written one, "  --state FILE   the state …".
var subFlagLineRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^[ \t]+(?:-([a-zA-Z]), )?--([a-z][a-z0-9-]*)(\[=true\|false\])?(?: ([A-Za-z]+))?(?:[ \t]{2,}(.*))?$`)
})

// subFlagChoices are the fixed values of subcommands' flags.
var subFlagChoices = map[string][]string{
	"list --format":      {"text", "json"},
	"inventory --format": {"text", "json"},
	"summarize --format": {"text", "json"},
	"peer --format":      {"text", "json"},
	"peer --fail-on":     {"fail", "warn"},
}

// valueTypes are the value words of a --help that are not paths.
var valueTypes = map[string]bool{"int": true, "float": true, "duration": true, "size": true,
	"DURATION": true, "UNIT": true, "TEXT": true, "NAME": true}

// subFlagText are the subcommands' string flags that are not paths: a
// name, an address, a size or a secret completes nothing.
var subFlagText = map[string]bool{
	"expect --class": true, "expect --hosts": true, "expect --host": true, "slurm --node": true,
	"peer --device": true, "peer --listen": true, "peer --max-memory": true, "peer --token": true,
}

// subcommandFlags are each subcommand's own flags (its words' together:
// slurm healthcheck and prolog, peer serve and test), in the order of its
// --help, by subcommand; --help itself included. Subcommands without flags
// of their own are absent.
func subcommandFlags() map[string][]subFlag {
	out := map[string][]subFlag{}
	for _, s := range subcommands {
		if s.name == "help" || s.name == "completion" {
			continue
		}
		helps := [][]string{{s.name}}
		for _, w := range s.words {
			helps = append(helps, []string{s.name, w})
		}
		seen := map[string]bool{"help": true}
		var flags []subFlag
		for _, h := range helps {
			var buf bytes.Buffer
			run(append(h, "--help"), &buf, io.Discard)
			for _, f := range parseHelpFlags(s.name, buf.String()) {
				if !seen[f.name] {
					seen[f.name] = true
					flags = append(flags, f)
				}
			}
		}
		if len(flags) > 0 {
			out[s.name] = append(flags, subFlag{name: "help", short: "h", usage: "print this help"})
		}
	}
	return out
}

// parseHelpFlags reads the flag lines of one --help.
func parseHelpFlags(sub, help string) []subFlag {
	var out []subFlag
	for _, m := range subFlagLineRE().FindAllStringSubmatch(help, -1) {
		f := subFlag{short: m[1], name: m[2], usage: strings.TrimSpace(m[5])}
		switch {
		case m[3] != "" || m[4] == "":
		case valueTypes[m[4]] || subFlagText[sub+" --"+f.name]:
			f.takes = "value"
		default:
			f.takes = "file"
		}
		if c := subFlagChoices[sub+" --"+f.name]; c != nil {
			f.choices, f.takes = c, "value"
		}
		out = append(out, f)
	}
	return out
}

// runFlagsOf are the run's flags a subcommand takes beside its own: slurm
// and npd run the checks, but set some of the run's flags themselves (and
// refuse them), and npd's --state is its own.
func (w completionWords) runFlagsOf(sub string, own []subFlag) []*pflag.Flag {
	refused := map[string]bool{}
	switch sub {
	case "slurm":
		for n := range notForSlurm {
			refused[n] = true
		}
	case "npd":
		for _, n := range npdRunFixed {
			refused[n] = true
		}
	default:
		return nil
	}
	for _, f := range own {
		refused[f.name] = true
	}
	var out []*pflag.Flag
	for _, f := range w.flags {
		if !refused[f.Name] {
			out = append(out, f)
		}
	}
	return out
}

// bashSubcommands is the part of the bash function that completes a
// subcommand's flags and their values; what it leaves (a run's flag of
// slurm, a subcommand's word) falls through to the rest of the function.
func (w completionWords) bashSubcommands() string {
	subs := subcommandFlags()
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("    local sub=\n    [[ $COMP_CWORD -gt 1 && ${COMP_WORDS[1]} != -* ]] && sub=${COMP_WORDS[1]}\n")
	b.WriteString("    case \"$sub\" in\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %s)\n        case \"$prev\" in\n", n)
		var words, files, values []string
		for _, f := range subs[n] {
			spell := []string{"--" + f.name}
			if f.short != "" {
				spell = append(spell, "-"+f.short)
			}
			words = append(words, spell...)
			switch {
			case f.choices != nil:
				fmt.Fprintf(&b, "        %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", strings.Join(spell, "|"), strings.Join(f.choices, " "))
			case f.takes == "file":
				files = append(files, spell...)
			case f.takes == "value":
				values = append(values, spell...)
			}
		}
		if len(files) > 0 {
			fmt.Fprintf(&b, "        %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", strings.Join(files, "|"))
		}
		if len(values) > 0 {
			fmt.Fprintf(&b, "        %s) COMPREPLY=(); return ;;\n", strings.Join(values, "|"))
		}
		for _, f := range w.runFlagsOf(n, subs[n]) {
			words = append(words, "--"+f.Name)
			if f.Shorthand != "" {
				words = append(words, "-"+f.Shorthand)
			}
		}
		fmt.Fprintf(&b, "        esac\n        if [[ $cur == -* ]]; then\n            COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n        fi ;;\n", strings.Join(words, " "))
	}
	b.WriteString("    esac\n")
	return b.String()
}

// fishSubcommands are the fish lines of the subcommands' own flags.
func (w completionWords) fishSubcommands() string {
	subs := subcommandFlags()
	var b strings.Builder
	for _, s := range subcommands {
		for _, f := range subs[s.name] {
			line := fmt.Sprintf("complete -c rdmadoctor -n '__fish_seen_subcommand_from %s' -l %s", s.name, f.name)
			if f.short != "" {
				line += " -s " + f.short
			}
			switch {
			case f.choices != nil:
				line += " -x -a " + fishQuote(strings.Join(f.choices, " "))
			case f.takes == "file":
				line += " -r -F"
			case f.takes == "value":
				line += " -x"
			}
			b.WriteString(line + " -d " + fishQuote(firstSentence(f.usage)) + "\n")
		}
		for _, f := range w.runFlagsOf(s.name, subs[s.name]) {
			b.WriteString(w.fishRunFlag(fishQuote("__fish_seen_subcommand_from "+s.name), f))
		}
	}
	return b.String()
}
