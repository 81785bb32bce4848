package main

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// textWidth is the width the text report and explain fit in: the
// terminal's when w is one, else COLUMNS (a pipe into less or a CI log
// keeps the width the user's shell says), else report.DefaultWidth.
func textWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	return report.DefaultWidth
}

// notRun is how many checks of the catalog a --check selection left out
// (0 without --check): the text report's verdict then names them.
func notRun(asked []string, rep *report.Report) int {
	if len(asked) == 0 {
		return 0
	}
	return max(0, len(checks.Catalog())-len(rep.Checks))
}
