package sysfs

import "testing"

func TestNearest(t *testing.T) {
	nic := "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:3b:00.0"
	gpus := []string{
		"/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0",                           // the other socket
		"/sys/devices/pci0000:00/0000:00:03.0/0000:1a:00.0",                           // same root complex
		"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:3c:00.0", // same switch
		"",
	}
	if i, shared := Nearest(nic, gpus); i != 2 || shared != 2 {
		t.Fatalf("nearest %d sharing %d", i, shared)
	}
	if i, shared := Nearest(nic, gpus[:2]); i != 1 || shared != 0 {
		t.Fatalf("nearest of two %d sharing %d", i, shared)
	}
	if i, shared := Nearest("", []string{"", ""}); i != 0 || shared != 0 {
		t.Fatalf("unknown paths: %d sharing %d", i, shared)
	}
}
