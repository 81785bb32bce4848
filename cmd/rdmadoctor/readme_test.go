package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readDoc reads a file of the repository by its path from the root:
// README.md, docs/commands.md.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// docBlocks returns the ```sh blocks of the section of file that starts
// with heading, in order.
func docBlocks(t *testing.T, file, heading string) []string {
	t.Helper()
	s := readDoc(t, file)
	start := strings.Index(s, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no %q section", file, heading)
	}
	s = s[start+1:]
	if end := strings.Index(s[len(heading):], "\n## "); end >= 0 {
		s = s[:len(heading)+end]
	}
	var blocks []string
	for {
		i := strings.Index(s, "```sh\n")
		if i < 0 {
			return blocks
		}
		s = s[i+len("```sh\n"):]
		j := strings.Index(s, "```")
		if j < 0 {
			t.Fatalf("%s: an unclosed ```sh block", file)
		}
		blocks = append(blocks, s[:j])
		s = s[j+3:]
	}
}

var (
	shownExit  = regexp.MustCompile(`(?m)^exit code: (\d+)$`)
	reportExit = regexp.MustCompile(`(?m) — exit (\d+)$`)
)

// TestReadmeFreshMachine runs README's first two blocks of "On a fresh
// machine" as written, in the repository root: the first builds the
// portable binary and runs it on this host, the second on a bundled host.
// The exit code each prints must be the one its report ends with; the
// bundled host's must be port.state's 19. docs/getting-started.md opens
// with the same two blocks.
func TestReadmeFreshMachine(t *testing.T) {
	blocks := docBlocks(t, "README.md", "## On a fresh machine")
	if len(blocks) < 2 {
		t.Fatalf("want the build-and-run block and the bundled-host block, found %d blocks", len(blocks))
	}
	guide := docBlocks(t, "docs/getting-started.md", "## On a fresh machine")
	if len(guide) < 2 || guide[0] != blocks[0] || guide[1] != blocks[1] {
		t.Errorf("docs/getting-started.md's first two blocks differ from README's:\n%q\nwant\n%q", guide, blocks[:2])
	}
	if !strings.Contains(blocks[0], "CGO_ENABLED=0") {
		t.Error("the fresh-machine block does not build with CGO_ENABLED=0")
	}
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: %v", tool, err)
		}
	}
	for i, want := range []string{"", "19"} {
		cmd := exec.Command("bash", "-c", blocks[i])
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("block %d exited with %v (its last command is the echo):\n%s", i+1, err, out)
		}
		shown, rep := shownExit.FindSubmatch(out), reportExit.FindSubmatch(out)
		if shown == nil || rep == nil {
			t.Fatalf("block %d: no exit code printed, or no report:\n%s", i+1, out)
		}
		if string(shown[1]) != string(rep[1]) {
			t.Errorf("block %d prints exit code %s, its report says exit %s", i+1, shown[1], rep[1])
		}
		if want != "" && string(shown[1]) != want {
			t.Errorf("block %d prints exit code %s, want %s:\n%s", i+1, shown[1], want, out)
		}
	}
}

// docPages are README.md and every page under docs/, by their path from
// the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, p := range pages {
		names = append(names, "docs/"+filepath.Base(p))
	}
	if len(names) < 10 {
		t.Fatalf("only %d documentation pages: %v", len(names), names)
	}
	return names
}

// TestReadmeShort: README is the short version — at most 200 lines — and
// names every subcommand, as docs/commands.md does.
func TestReadmeShort(t *testing.T) {
	readme := readDoc(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 200 {
		t.Errorf("README.md has %d lines, want at most 200: move the detail to docs/", n)
	}
	commands := readDoc(t, "docs/commands.md")
	for _, s := range subcommands {
		if !strings.Contains(readme, "`rdmadoctor "+s.name) {
			t.Errorf("README.md's command list lacks rdmadoctor %s", s.name)
		}
		if !strings.Contains(commands, "\nrdmadoctor "+s.name+" ") {
			t.Errorf("docs/commands.md's command list lacks rdmadoctor %s", s.name)
		}
	}
	for _, want := range []string{"go install", "make package", "go test ./...", "## Sample report"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}

// mdLines are the lines of a Markdown text outside fenced code blocks.
func mdLines(text string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// slug is the anchor GitHub gives a heading: lower case, blanks to
// hyphens, every other character but letters, digits, '-' and '_' left
// out.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var headingRE = regexp.MustCompile(`^(#{1,6}) (.*)$`)

// anchors are the heading anchors of a Markdown text, a repeated one
// numbered as GitHub numbers it.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range mdLines(text) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var (
	contentsItemRE = regexp.MustCompile(`^- \[.*\]\(#([^)]+)\)$`)
	codeSpanRE     = regexp.MustCompile("``.*?``|`[^`]*`")
	linkRE         = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file or directory of the repository, and its #anchor a heading of that
// page.
func TestDocsLinks(t *testing.T) {
	for _, page := range docPages(t) {
		text := readDoc(t, page)
		for _, l := range mdLines(text) {
			l = codeSpanRE.ReplaceAllStringFunc(l, func(span string) string {
				if strings.Contains(span, "](") {
					return span // a link text in backticks: [`x`](y)
				}
				return ""
			})
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s: link %s leaves the repository", page, target)
						continue
					}
					if _, err := os.Stat(filepath.Join("../..", dest)); err != nil {
						t.Errorf("%s: link %s: %v", page, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %s: an anchor into a file that is not Markdown", page, target)
					continue
				}
				if !anchors(readDoc(t, dest))[anchor] {
					t.Errorf("%s: link %s: %s has no heading #%s", page, target, dest, anchor)
				}
			}
		}
	}
}

// TestDocsContents: a page longer than a screen (40 lines) opens with a
// Contents list that links to each of its ## sections, before the first.
func TestDocsContents(t *testing.T) {
	for _, page := range docPages(t) {
		text := readDoc(t, page)
		if strings.Count(text, "\n") <= 40 {
			continue
		}
		lines := mdLines(text)
		var sections []string
		first := -1
		for i, l := range lines {
			if strings.HasPrefix(l, "## ") {
				sections = append(sections, slug(l[3:]))
				if first < 0 {
					first = i
				}
			}
		}
		if len(sections) == 0 {
			t.Errorf("%s: %d lines and no ## sections", page, strings.Count(text, "\n"))
			continue
		}
		listed := map[string]bool{}
		found := false
		for _, l := range lines[:first] {
			if l == "**Contents**" {
				found = true
				continue
			}
			if found {
				if m := contentsItemRE.FindStringSubmatch(l); m != nil {
					listed[m[1]] = true
				}
			}
		}
		if !found {
			t.Errorf("%s: longer than 40 lines and no **Contents** list before its first section", page)
			continue
		}
		for _, s := range sections {
			if !listed[s] {
				t.Errorf("%s: the Contents list lacks #%s", page, s)
			}
		}
	}
}
