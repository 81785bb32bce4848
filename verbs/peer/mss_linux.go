package peer

import (
	"fmt"
	"syscall"
)

func setMaxSeg(fd, mss int) error {
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, mss); err != nil {
		return fmt.Errorf("setsockopt TCP_MAXSEG %d: %w", mss, err)
	}
	return nil
}
