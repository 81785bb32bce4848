package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// climb817 is x/…/x/../…/.. with 817 of each: 4085 bytes that lead back
// where they started, just under PATH_MAX with a short name after them.
var climb817 = strings.Repeat("x/", 817) + strings.Repeat("../", 817)

// hostileChain is the archive of issue 22's finding 2: one link, then n
// links of the shape x/*817 + ../*817 + L, each naming the one before it.
// A resolver that rebuilds the path at every step and walks every chain
// again for every link spins for minutes on it; it compresses to a few KB
// for n=200 (~4 KB at gzip -9, ~9 KB as tarGz writes it). reversed lists the links from the end of the chain.
func hostileChain(t testing.TB, n int, reversed bool) []byte {
	t.Helper()
	links := []ent{symlink("snap/sys/l0", ".")}
	for i := 1; i <= n; i++ {
		links = append(links, symlink(fmt.Sprintf("snap/sys/l%d", i), climb817+fmt.Sprintf("l%d", i-1)))
	}
	if reversed {
		for i, j := 0, len(links)-1; i < j; i, j = i+1, j-1 {
			links[i], links[j] = links[j], links[i]
		}
	}
	ents := []ent{file("snap/rdmadoctor.facts.json", `{"schema":"rdmadoctor.facts/v1"}`), dir("snap/sys/")}
	return tarGz(t, append(ents, links...)...)
}

// hostileWide is n links of the shape x/*817 + ../*817 + ".", none through
// another: each costs 1,635 steps to resolve, however it is done.
func hostileWide(t testing.TB, n int) []byte {
	t.Helper()
	ents := []ent{file("snap/rdmadoctor.facts.json", `{"schema":"rdmadoctor.facts/v1"}`), dir("snap/sys/")}
	for i := range n {
		ents = append(ents, symlink(fmt.Sprintf("snap/sys/w%d", i), climb817+"."))
	}
	return tarGz(t, ents...)
}

// unpackWithin unpacks data under a deadline and fails the test, without
// waiting for it, when Unpack has not returned by limit.
func unpackWithin(t *testing.T, data []byte, deadline, limit time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	type result struct {
		took time.Duration
		err  error
	}
	done := make(chan result, 1)
	dest := t.TempDir()
	go func() {
		start := time.Now()
		_, err := snapshot.Unpack(ctx, opener(data), "hostile.tar.gz", dest, snapshot.DefaultLimits())
		done <- result{time.Since(start), err}
	}()
	select {
	case r := <-done:
		return r.took, r.err
	case <-time.After(limit):
		t.Fatalf("Unpack of a %d-byte archive still running after %v (deadline %v)", len(data), limit, deadline)
	}
	return 0, nil
}

// TestUnpackHostileLinkChain: the ~4 KB archive of finding 2 is refused,
// with the link and the reason, well within a 2 s deadline — whichever
// end of the chain comes first. Before link resolution was memoised it
// ran 32 s (6 s for n=40 on a 2-core machine) and ignored the deadline.
func TestUnpackHostileLinkChain(t *testing.T) {
	for _, reversed := range []bool{false, true} {
		t.Run(fmt.Sprintf("reversed=%v", reversed), func(t *testing.T) {
			data := hostileChain(t, 200, reversed)
			if len(data) > 10000 {
				t.Fatalf("the archive is %d bytes, not a few KB", len(data))
			}
			took, err := unpackWithin(t, data, 2*time.Second, 3*time.Second)
			entry := "snap/sys/l40" // the first link that takes 41 hops
			if reversed {
				entry = "snap/sys/l200"
			}
			assertRefused(t, err, entry, "follows more than 40 links (the kernel refuses it: ELOOP)")
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("the reason quotes the whole 4 KB target: %d bytes", len(err.Error()))
			}
			t.Logf("%d bytes, refused in %v: %v", len(data), took, err)
		})
	}
}

// TestUnpackHostileLinksWide: links that each cost thousands of steps and
// lean on no other link are refused once the steps for the whole archive
// pass their cap, with that reason, in bounded time.
func TestUnpackHostileLinksWide(t *testing.T) {
	data := hostileWide(t, 2600) // 2600 × 1635 steps > 1<<22
	took, err := unpackWithin(t, data, 2*time.Second, 3*time.Second)
	var ue *snapshot.UnpackError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "path steps") || !strings.HasPrefix(ue.Entry, "snap/sys/w") {
		t.Fatalf("err %v, want a refusal of a link for the steps it takes", err)
	}
	t.Logf("%d bytes, refused in %v", len(data), took)
}

// TestUnpackStopsPromptly: an interrupt (a cancelled context) at any point
// of unpacking an archive at the name limit — reading, judging, resolving
// links — ends Unpack within 100 ms, with the context's error. (Before,
// link resolution never looked at the context: the run went on for
// minutes after the interrupt.) A loaded machine's scheduler alone can
// add 100 ms, so each point gets three tries; an unbounded phase fails all.
func TestUnpackStopsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an archive of 32 MB of names")
	}
	wide, chain := hostileWide(t, 8000), hostileChain(t, 200, false)
	took, err := unpackWithin(t, wide, time.Minute, 5*time.Second)
	t.Logf("the archive at the name limit, not cancelled: %v in %v", err, took)
	for _, c := range []struct {
		data  []byte
		after time.Duration
	}{
		{chain, time.Millisecond}, {chain, 5 * time.Millisecond}, {chain, 20 * time.Millisecond},
		{wide, 5 * time.Millisecond}, {wide, 50 * time.Millisecond},
		{wide, took / 4}, {wide, took / 2}, {wide, took * 3 / 4}, {wide, took * 9 / 10},
	} {
		var fails []string
		for try := 0; try < 3; try++ {
			why := cancelUnpack(t, c.data, c.after)
			if why == "" {
				fails = nil
				break
			}
			fails = append(fails, why)
		}
		if fails != nil {
			t.Errorf("%d-byte archive cancelled after %v: %s", len(c.data), c.after, strings.Join(fails, "; "))
		}
	}
}

// cancelUnpack unpacks data, cancels it after the delay, and says what went
// wrong, or "" when Unpack returned within 100 ms of the cancel with the
// context's error (or ended first).
func cancelUnpack(t *testing.T, data []byte, after time.Duration) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	timer := time.AfterFunc(after, func() { cancelled <- time.Now(); cancel() })
	defer timer.Stop()
	done := make(chan error, 1)
	dest := t.TempDir()
	go func() {
		_, err := snapshot.Unpack(ctx, opener(data), "hostile.tar.gz", dest, snapshot.DefaultLimits())
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(after + 2*time.Second):
		t.Fatalf("cancelled after %v: Unpack still running 2 s later", after)
	}
	end := time.Now()
	var at time.Time
	select {
	case at = <-cancelled:
	default:
		return "" // finished before the cancel: nothing to stop
	}
	if lag := end.Sub(at); lag > 100*time.Millisecond {
		return fmt.Sprintf("returned %v later (%v)", lag, err)
	}
	var ue *snapshot.UnpackError
	if !errors.Is(err, context.Canceled) && !errors.As(err, &ue) { // a refusal may land just before the cancel
		return fmt.Sprintf("err %v, want context.Canceled", err)
	}
	return ""
}

// TestUnpackResolvesLinksLikeTheKernel: what the kernel can follow inside
// the root is accepted; an escape, a loop and a chain of more than 40 links
// (ELOOP) are refused with the entry and the reason.
func TestUnpackResolvesLinksLikeTheKernel(t *testing.T) {
	facts := file("snap/rdmadoctor.facts.json", `{"schema":"rdmadoctor.facts/v1"}`)
	chain := func(n int) []ent {
		ents := []ent{facts, dir("snap/sys/"), symlink("snap/sys/c0", ".")}
		for i := 1; i <= n; i++ {
			ents = append(ents, symlink(fmt.Sprintf("snap/sys/c%d", i), fmt.Sprintf("c%d", i-1)))
		}
		return ents
	}
	sysfsLike := []ent{facts,
		dir("snap/sys/devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0/"),
		symlink("snap/sys/devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0/device", "../.."),
		symlink("snap/sys/class/infiniband/mlx5_0", "../../devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0"),
		symlink("snap/sys/dev0", "class/infiniband/mlx5_0/device/../../../.."),
		symlink("snap/sys/gone", "nowhere/a/b"),
		symlink("snap/sys/back", "gone/../../../sys"),
		symlink("snap/sys/same", "c/c/c/../../.."),
	}
	repeat := []ent{facts, dir("snap/sys/"), symlink("snap/sys/a", "."), symlink("snap/sys/b", strings.Repeat("a/", 41)+"x")}
	for _, c := range []struct {
		name         string
		ents         []ent
		entry, cause string // "" when accepted
	}{
		{"sysfs-like, through links and missing names", sysfsLike, "", ""},
		{"a chain of 40 links", chain(39), "", ""},
		{"a chain of 41 links", chain(40), "snap/sys/c40", "follows more than 40 links"},
		{"one link followed 41 times", repeat, "snap/sys/b", "follows more than 40 links"},
		{"a loop", []ent{facts, dir("snap/sys/"), symlink("snap/sys/p", "q/x"), symlink("snap/sys/q", "p")}, "snap/sys/p", `symlink loop: resolving "q/x" leads back to the link "sys/p"`},
		{"a link through itself", []ent{facts, dir("snap/sys/"), symlink("snap/sys/s", "s/..")}, "snap/sys/s", "symlink loop"},
		{"out past a missing name", []ent{facts, dir("snap/sys/"), symlink("snap/sys/d", ".."), symlink("snap/sys/g", "d/nowhere"), symlink("snap/sys/h", "g/../..")}, "snap/sys/h", "through other links"},
		{"out through a cached link", []ent{facts, dir("snap/sys/d/"), symlink("snap/sys/d/up", "../.."), symlink("snap/sys/e", "d/up/sys/d/up/..")}, "snap/sys/e", "through other links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := unpackWithin(t, tarGz(t, c.ents...), 2*time.Second, 3*time.Second)
			if c.entry == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			assertRefused(t, err, c.entry, c.cause)
		})
	}
}
