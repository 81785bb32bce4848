package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	beginRe = regexp.MustCompile(`@@RDVM-BEGIN ([A-Za-z0-9._-]+)@@`)
	endRe   = regexp.MustCompile(`@@RDVM-END ([A-Za-z0-9._-]+)@@`)
)

var b64LineRe = regexp.MustCompile(`^[A-Za-z0-9+/]+=*$`)

const doneMarker = "@@RDVM-DONE@@"

// cmdCollect unpacks the records of a console log into DIR/<name>/, writes
// DIR/order (record names in arrival order) and DIR/.done when the guest
// reached its end. A record that does not decode is reported, not fatal: the
// verifier sees it missing.
func cmdCollect(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: rdvm collect CONSOLE DIR")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	dir := args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var order []string
	var cur string
	var body strings.Builder
	done := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.Contains(line, doneMarker):
			done = true
		case beginRe.MatchString(line):
			cur = beginRe.FindStringSubmatch(line)[1]
			body.Reset()
		case cur != "" && endRe.MatchString(line):
			if err := unpackRecord(body.String(), filepath.Join(dir, cur)); err != nil {
				fmt.Fprintf(os.Stderr, "rdvm collect: record %s: %v\n", cur, err)
			} else {
				order = append(order, cur)
			}
			cur = ""
		case cur != "":
			// Anything else that reached the console mid-record (a
			// stray message) is not base64 and is dropped.
			if l := strings.TrimSpace(line); b64LineRe.MatchString(l) {
				body.WriteString(l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", args[0], err)
	}
	if err := os.WriteFile(filepath.Join(dir, "order"), []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if done {
		return os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644)
	}
	return nil
}

func unpackRecord(b64, dir string) error {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		name := filepath.Clean(h.Name)
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return fmt.Errorf("tar %s: %w", name, err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
		}
	}
}
