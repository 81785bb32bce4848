package sysfs

import (
	"strings"
)

// Container says whether this host looks like the inside of a container,
// and why ("docker: /.dockerenv exists"); "" when nothing says so. It matters
// for the RDMA device nodes: a container sees the host's /sys but only the
// /dev nodes it was given, so a missing /dev/infiniband/uverbsN there means
// "not passed through", not "not created".
func (h *Host) Container() string {
	marks := []struct{ path, what string }{
		{"/.dockerenv", "docker"},
		{"/run/.containerenv", "podman"},
	}
	for _, m := range marks {
		if ok, _ := h.Exists(m.path); ok {
			return m.what + ": " + m.path + " exists"
		}
	}
	if s, err := h.ReadAttr("/run/systemd/container"); err == nil && strings.TrimSpace(s) != "" {
		return strings.TrimSpace(s) + ": /run/systemd/container says so"
	}
	if data, err := h.ReadFile("/proc/1/cgroup"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			for _, k := range []string{"kubepods", "docker", "containerd", "libpod", "lxc"} {
				if strings.Contains(l, k) {
					return k + ": /proc/1/cgroup names it"
				}
			}
		}
	}
	return ""
}
