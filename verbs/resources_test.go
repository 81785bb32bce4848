package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// A context with scratch memory and nothing behind it: enough for the
// calls that must fail before they reach the library.
func scratchQP(t *testing.T) *QP {
	t.Helper()
	a, err := newArena()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.buf.Free() })
	return &QP{PD: &PD{Context: &Context{scratch: a}}}
}

// More work requests than the scratch memory holds are an error, never a
// panic, whether the arena fills on a work request or on its SGE.
func TestPostTooManyWorkRequests(t *testing.T) {
	qp := scratchQP(t)
	for _, sges := range [][]SGE{nil, {{Addr: 1, Length: 8}}} {
		sends := make([]SendWR, 5000)
		recvs := make([]RecvWR, 5000)
		for i := range sends {
			sends[i].SGEs = sges
			recvs[i].SGEs = sges
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("PostSend/PostRecv of 5000 work requests (%d SGEs each) panicked: %v", len(sges), p)
				}
			}()
			if err := qp.PostSend(sends...); err == nil || !strings.Contains(err.Error(), "do not fit") {
				t.Errorf("PostSend: %v", err)
			}
			if err := qp.PostRecv(recvs...); err == nil || !strings.Contains(err.Error(), "do not fit") {
				t.Errorf("PostRecv: %v", err)
			}
		}()
	}
}

func TestRegMRWithoutBuffer(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("RegMR(nil) panicked: %v", p)
		}
	}()
	if _, err := (&PD{}).RegMR(nil, 0, 4096, AccessLocalWrite); err == nil || !strings.Contains(err.Error(), "ibv_reg_mr") {
		t.Fatalf("RegMR(nil) = %v", err)
	}
	b, err := NewBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	if _, err := (&PD{}).RegMR(b, 0, 4096, AccessLocalWrite); err == nil {
		t.Fatal("RegMR of a freed buffer succeeded")
	}
}

// A post's positive return is an errno; a negative one is the provider's
// own code and is reported raw, not turned into the errno it may not be.
func TestPostErrorReturnValues(t *testing.T) {
	e := postError("ibv_post_send", 12, 0)
	if e.Errno != syscall.ENOMEM || !errors.Is(e, syscall.ENOMEM) || !strings.Contains(e.Error(), "ENOMEM") {
		t.Fatalf("rc 12: %+v %q", e, e)
	}
	for _, rc := range []int32{-2, -1, -22, 5000} {
		e := postError("ibv_post_recv", rc, 1)
		if e.Errno != 0 || ErrnoOf(e) != 0 || e.Return != rc {
			t.Errorf("rc %d read as errno %d", rc, e.Errno)
		}
		if s := e.Error(); !strings.Contains(s, fmt.Sprintf("returned %d", rc)) || !strings.Contains(s, "not an errno") || !strings.Contains(s, "work request 1") {
			t.Errorf("rc %d: %q", rc, s)
		}
	}
	// mlx5's poll returns -2 for a CQ in error: not ENOENT.
	var re error = &ReturnError{Verb: "ibv_poll_cq", Return: -2}
	if ErrnoOf(re) != 0 || strings.Contains(re.Error(), "ENOENT") || !strings.Contains(re.Error(), "returned -2") {
		t.Fatalf("poll error %q", re)
	}
}
