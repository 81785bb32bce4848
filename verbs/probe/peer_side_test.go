package probe

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// On a host with a NIC per rail, the port on the peer's subnet is picked,
// not the first ACTIVE one.
func TestPortOnSubnet(t *testing.T) {
	root := t.TempDir()
	write := func(name, v string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for dev, rail := range map[string]struct{ ndev, gid string }{
		"mlx5_0": {"rail0", "0000:0000:0000:0000:0000:ffff:0a00:0001"}, // 10.0.0.1
		"mlx5_1": {"rail1", "0000:0000:0000:0000:0000:ffff:0a01:0001"}, // 10.1.0.1
	} {
		port := "sys/class/infiniband/" + dev + "/ports/1/"
		write(port+"state", "4: ACTIVE")
		write(port+"gid_attrs/types/0", "IB/RoCE v1")
		write(port+"gids/0", "fe80:0000:0000:0000:0000:0000:0000:0001")
		write(port+"gid_attrs/types/1", "RoCE v2")
		write(port+"gid_attrs/ndevs/1", rail.ndev)
		write(port+"gids/1", rail.gid)
	}
	write("rdmadoctor.facts.json", `{"schema":"rdmadoctor.facts/v1","netdevs":[`+
		`{"name":"rail0","index":2,"mtu":9000,"addresses":["10.0.0.1/16"]},{"name":"rail1","index":3,"mtu":9000,"addresses":["10.1.0.1/16"]}]}`)
	dl := &verbs.DeviceList{Devices: []*verbs.Device{{Name: "mlx5_0"}, {Name: "mlx5_1"}}}
	sys := filepath.Join(root, "sys")
	if d, port := portOnSubnet(sys, root, dl, netip.MustParseAddr("10.1.7.9")); d == nil || d.Name != "mlx5_1" || port != 1 {
		t.Fatalf("peer 10.1.7.9: %v port %d, want mlx5_1 port 1", d, port)
	}
	if d, _ := portOnSubnet(sys, root, dl, netip.MustParseAddr("192.0.2.9")); d != nil {
		t.Fatalf("peer on no rail's subnet: %s", d.Name)
	}
}

// A control connection to this host's own address, or over loopback, joins
// two processes of one host; one to another address does not.
func TestOnSameHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !onSameHost(&wire.Conn{Conn: c}) {
		t.Errorf("%v → %v: not the same host", c.LocalAddr(), c.RemoteAddr())
	}
	other := fakeAddrConn{local: "192.0.2.1:40000", remote: "192.0.2.2:18516"}
	if onSameHost(&wire.Conn{Conn: other}) {
		t.Error("192.0.2.1 → 192.0.2.2 called the same host")
	}
	self := fakeAddrConn{local: "192.0.2.1:40000", remote: "192.0.2.1:18516"}
	if !onSameHost(&wire.Conn{Conn: self}) {
		t.Error("192.0.2.1 → 192.0.2.1 not called the same host")
	}
}

// fakeAddrConn is a net.Conn with given addresses and nothing behind them.
type fakeAddrConn struct {
	net.Conn
	local, remote string
}

func (f fakeAddrConn) LocalAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(f.local))
}
func (f fakeAddrConn) RemoteAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(f.remote))
}
