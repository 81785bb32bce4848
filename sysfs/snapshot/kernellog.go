package snapshot

import (
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// KernelLogNote is the manifest's word on the kernel log kept.
type KernelLogNote struct {
	File  string `json:"file"`  // sysfs.KernelLogFile, at the snapshot's top
	Lines int    `json:"lines"` // RDMA lines kept (0: read, and none were the RDMA stack's)
}

// captureKernelLog keeps the RDMA part of the kernel log — live, read
// from the kernel's ring buffer; from a snapshot root, its kernel.log — or
// says in the facts why it could not. Many remedies say "read dmesg": whoever
// replays the snapshot reads this instead.
func captureKernelLog(h *sysfs.Host, s *Snapshot) {
	lines, err := h.KernelLog()
	if err != nil {
		if s.Facts.Unavailable == nil {
			s.Facts.Unavailable = map[string]string{}
		}
		if _, ok := s.Facts.Unavailable["kernel_log"]; !ok { // a source snapshot's reason stands
			s.Facts.Unavailable["kernel_log"] = err.Error()
		}
		return
	}
	text := strings.Join(lines, "\n")
	if len(lines) > 0 {
		text += "\n"
	}
	s.KernelLog = []byte(text)
	s.Manifest.KernelLog = &KernelLogNote{File: sysfs.KernelLogFile, Lines: len(lines)}
}
