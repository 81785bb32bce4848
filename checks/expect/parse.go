package expect

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Limits on what Parse reads: an expectations file is a page of text, so
// anything larger is a mistake (or hostile) and is refused, not buffered.
const (
	MaxLine = 4 << 10 // bytes in one line, without its newline
	MaxFile = 1 << 20 // bytes in one file
)

// DefaultPath is where a live run looks for expectations when --expect is
// not given.
const DefaultPath = "/etc/rdmadoctor/expect.conf"

// ParseError is one fault of an expectations file, at a line and key.
type ParseError struct {
	File string
	Line int    // 0 when the fault is the whole file's
	Key  string // the key as written, "" when the line has none
	Msg  string
}

func (e *ParseError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Key == "":
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Msg)
}

// Known are the IDs an expectations file may name: skip and fail_on_warn
// name checks (the catalog's), waive names declared findings. A nil list
// is not checked.
type Known struct{ Checks, Findings []string }

// Load reads and parses the expectations file at path. It opens without
// blocking, so a named pipe that nobody writes reads as empty instead of
// hanging the run (a pipe from a shell's <(...) is read as it fills).
func Load(path string) (*File, error) { return LoadKnown(path, Known{}) }

// LoadKnown is Load that also checks the IDs the file names against
// known, in the same pass: a misspelt key and a misspelt check ID are
// reported together, in line order, not one round of fixing after the
// other.
func LoadKnown(path string, known Known) (*File, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	if st.IsDir() {
		return nil, &ParseError{File: path, Msg: "is a directory, not an expectations file"}
	}
	if st.Mode().IsRegular() && st.Size() > MaxFile {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf("%d bytes, larger than the %d an expectations file may have", st.Size(), MaxFile)}
	}
	if st.Mode().IsRegular() {
		return ParseKnown(path, fh, known)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read expectations: %w", err)
	}
	if len(data) == 0 {
		return nil, &ParseError{File: path, Msg: "nothing to read (a pipe or device that gave no data)"}
	}
	return ParseKnown(path, bytes.NewReader(data), known)
}

// ParseErrors is every fault of a file, in line order: an operator fixes
// them in one pass instead of one per run. errors.As finds the first
// *ParseError in it.
type ParseErrors []*ParseError

// maxErrors bounds what Parse collects: a binary file fed by mistake has a
// fault on every line, and the first screenful says what it is.
const maxErrors = 50

func (es ParseErrors) Error() string {
	lines := make([]string, 0, len(es))
	for _, e := range es {
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.As and errors.Is each fault.
func (es ParseErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// orNil is nil when there is no fault, so a nil ParseErrors is never
// returned as a non-nil error.
func (es ParseErrors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Parse reads an expectations file; name is used in errors and citations.
// It reports every faulty line (up to 50) as ParseErrors; a fault of the
// whole file (too large, a line too long) ends the reading there.
func Parse(name string, r io.Reader) (*File, error) { return ParseKnown(name, r, Known{}) }

// ParseKnown is Parse that also reports, among the file's other faults,
// every skip, fail_on_warn and waive value that known does not hold.
func ParseKnown(name string, r io.Reader, known Known) (*File, error) {
	p := &parser{f: &File{Name: name}, seen: map[string]int{}}
	lr := &io.LimitedReader{R: r, N: MaxFile + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), MaxLine+1)
	var errs ParseErrors
	tooBig := &ParseError{File: name, Msg: fmt.Sprintf("larger than the %d bytes an expectations file may have", MaxFile)}
	n := 0
	for sc.Scan() {
		n++
		if lr.N <= 0 {
			return nil, append(errs, tooBig)
		}
		if err := p.line(n, sc.Text()); err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				pe = &ParseError{File: name, Line: n, Msg: err.Error()}
			}
			if errs = append(errs, pe); len(errs) == maxErrors {
				errs = append(errs, &ParseError{File: name, Line: n, Msg: fmt.Sprintf("stopped after %d errors", maxErrors)})
				return nil, errs
			}
		}
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("line longer than %d bytes", MaxLine)
		}
		return nil, append(errs, &ParseError{File: name, Line: n + 1, Msg: msg})
	}
	if lr.N <= 0 {
		return nil, append(errs, tooBig)
	}
	for _, c := range p.f.Classes {
		if len(c.Hosts) == 0 {
			errs = append(errs, &ParseError{File: name, Line: c.Line, Msg: fmt.Sprintf("[class %s] has no hosts key: say which host names it applies to, e.g. hosts = node*", c.Name)})
		}
		if len(c.Waive) > 0 && c.WaiveReason == nil {
			errs = append(errs, &ParseError{File: name, Line: c.Waive[0].Line, Key: "waive",
				Msg: fmt.Sprintf("[class %s] waives findings without a waive_reason: say why they are not counted, e.g. waive_reason = \"optics RMA open\"", c.Name)})
		}
	}
	errs = append(errs, p.f.unknownIDs(known)...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		if len(errs) > maxErrors {
			errs = append(errs[:maxErrors], &ParseError{File: name, Line: errs[maxErrors].Line, Msg: fmt.Sprintf("stopped after %d errors", maxErrors)})
		}
		return nil, errs
	}
	return p.f, nil
}

// unknownIDs are the faults of CheckIDs and FindingIDs against known, for
// the lists known has.
func (f *File) unknownIDs(known Known) ParseErrors {
	var errs ParseErrors
	for _, fault := range []struct {
		list  []string
		check func([]string) error
	}{{known.Checks, f.CheckIDs}, {known.Findings, f.FindingIDs}} {
		if fault.list == nil {
			continue
		}
		var pes ParseErrors
		if errors.As(fault.check(fault.list), &pes) {
			errs = append(errs, pes...)
		}
	}
	return errs
}

type parser struct {
	f    *File
	cur  *Class
	seen map[string]int // class name → its header line
}

// classNameRE is what a class may be called: it is printed in reports.
// Compiled on first use: its {0,63} unrolls into hundreds of
// instructions, which every process (the verbs child too) would pay at
// start-up.
var classNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

func (p *parser) line(n int, text string) error {
	perr := func(key, format string, args ...any) error {
		return &ParseError{File: p.f.Name, Line: n, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if n == 1 {
		text = strings.TrimPrefix(text, "\ufeff") // a byte-order mark some editors write
	}
	if !utf8.ValidString(text) {
		return perr("", "not UTF-8 text")
	}
	if i := strings.IndexFunc(text, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }); i >= 0 {
		return perr("", "control character %q at column %d", text[i:i+1], i+1)
	}
	body, comment, _ := strings.Cut(text, "#")
	body, comment = strings.TrimSpace(body), strings.TrimSpace(comment)
	if body == "" {
		return nil
	}
	// A section header has no '='; a key may start with '[' (a device
	// glob such as [a-z]*).
	if strings.HasPrefix(body, "[") && !strings.Contains(body, "=") {
		err := p.section(n, body, perr)
		if err != nil {
			// The keys under a faulty header are still checked, so
			// every error is said at once, but into a class of their
			// own: not the previous section's, not "before a section".
			p.cur = &Class{Name: "(invalid)", Line: n, File: p.f.Name}
		}
		return err
	}
	key, value, ok := strings.Cut(body, "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if !ok || key == "" {
		return perr("", "want KEY = VALUE or [class NAME], got %q", clip(body))
	}
	if p.cur == nil {
		return perr(key, "key before the first [class NAME] section")
	}
	if value == "" {
		return perr(key, "no value")
	}
	if err := p.cur.set(key, value, pos{file: p.f.Name, line: n, comment: comment}); err != nil {
		return perr(key, "%v", err)
	}
	return nil
}

func (p *parser) section(n int, body string, perr func(string, string, ...any) error) error {
	inner, ok := strings.CutSuffix(body, "]")
	if !ok {
		return perr("", "section header %q does not end with ]", clip(body))
	}
	f := strings.Fields(inner[1:])
	if len(f) != 2 || f[0] != "class" {
		return perr("", "unknown section %q: the only section is [class NAME]", clip(body))
	}
	name := f[1]
	if !classNameRE().MatchString(name) {
		return perr("", "class name %q: want letters, digits, '.', '_' or '-', at most 64", clip(name))
	}
	if first, dup := p.seen[name]; dup {
		return perr("", "class %q already defined at line %d", name, first)
	}
	p.seen[name] = n
	p.cur = &Class{Name: name, Line: n, File: p.f.Name}
	p.f.Classes = append(p.f.Classes, p.cur)
	return nil
}

// clip shortens hostile input before it goes into a message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
