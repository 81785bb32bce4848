package report

import (
	"fmt"
	"strings"
)

// IBFabricPort is what the fabric said of one InfiniBand port, asked with
// management datagrams (or replayed from a snapshot's facts): the SM at its
// SM LID, the SMs the SA lists, the neighbour one hop out and the P_Key
// table. A part that could not be asked carries its error.
type IBFabricPort struct {
	CA           string       `json:"ca"`
	Port         int          `json:"port"`
	State        string       `json:"state"`
	PhysState    string       `json:"phys_state"`
	LID          uint16       `json:"lid"`
	SMLID        uint16       `json:"sm_lid"`
	PortGUID     string       `json:"port_guid"`
	SubnetPrefix string       `json:"subnet_prefix"`
	SM           *IBSMAnswer  `json:"sm,omitempty"`
	SMs          *IBSMList    `json:"sms,omitempty"`
	Neighbour    *IBNeighbour `json:"neighbour,omitempty"`
	PKeys        *IBPKeyTable `json:"pkeys,omitempty"`
}

// IBSM is one subnet manager the SA lists.
type IBSM struct {
	LID      uint16 `json:"lid"`
	GUID     string `json:"guid"`
	Priority uint8  `json:"priority"`
	State    string `json:"state"`
	NodeDesc string `json:"node_desc,omitempty"`
}

// IBSMAnswer is the SM that answers at a port's SM LID, or why not.
type IBSMAnswer struct {
	LID      uint16 `json:"lid,omitempty"`
	GUID     string `json:"guid,omitempty"`
	Priority uint8  `json:"priority,omitempty"`
	State    string `json:"state,omitempty"`
	NodeDesc string `json:"node_desc,omitempty"`
	Error    string `json:"error,omitempty"`
}

// IBSMList is the SMs the SA lists, or why not.
type IBSMList struct {
	SMs   []IBSM `json:"sms"`
	Error string `json:"error,omitempty"`
}

// IBNeighbour is the node at the other end of the port's cable, and its
// port as it sees the link.
type IBNeighbour struct {
	NodeType  string `json:"node_type,omitempty"`
	NodeGUID  string `json:"node_guid,omitempty"`
	NodeDesc  string `json:"node_desc,omitempty"`
	Port      int    `json:"port,omitempty"`
	State     string `json:"state,omitempty"`
	PhysState string `json:"phys_state,omitempty"`
	Width     string `json:"width,omitempty"`
	Speed     string `json:"speed,omitempty"`
	Error     string `json:"error,omitempty"`
}

// IBPKeyTable is the port's P_Key table, valid entries only, or why not.
type IBPKeyTable struct {
	Keys  []IBPKey `json:"keys"`
	Error string   `json:"error,omitempty"`
}

// IBPKey is one P_Key with its membership bit spelled out.
type IBPKey struct {
	PKey       string `json:"pkey"`
	FullMember bool   `json:"full_member"`
}

// writeIBFabricPort writes what the fabric said of one port, under the
// port's own lines (indent 4).
func writeIBFabricPort(b *strings.Builder, f IBFabricPort, width int) {
	if sm := f.SM; sm != nil {
		line := sm.Error
		if sm.GUID != "" {
			line = fmt.Sprintf("LID %d, GUID %s, %s, priority %d, %s", sm.LID, sm.GUID, orDash(sm.State), sm.Priority, quoteDesc(sm.NodeDesc))
			if sm.Error != "" {
				line += " (" + sm.Error + ")"
			}
		}
		kv(b, 4, "SM", line, width)
	}
	if l := f.SMs; l != nil {
		if l.Error != "" {
			kv(b, 4, "SA's SMs", "not listed: "+l.Error, width)
		}
		for _, sm := range l.SMs {
			kv(b, 4, "SA's SM", fmt.Sprintf("LID %d, GUID %s, %s, priority %d", sm.LID, sm.GUID, orDash(sm.State), sm.Priority), width)
		}
	}
	if n := f.Neighbour; n != nil {
		line := n.Error
		if n.NodeGUID != "" {
			line = fmt.Sprintf("%s %s, GUID %s, port %d, %s %s, %s (%s)", orDash(n.NodeType), quoteDesc(n.NodeDesc), n.NodeGUID,
				n.Port, orDash(n.Width), orDash(n.Speed), orDash(n.State), orDash(n.PhysState))
		}
		kv(b, 4, "neighbour", line, width)
	}
	if t := f.PKeys; t != nil {
		line := t.Error
		if t.Error == "" {
			var keys []string
			for _, k := range t.Keys {
				m := "limited"
				if k.FullMember {
					m = "full"
				}
				keys = append(keys, k.PKey+" "+m)
			}
			line = orDash(strings.Join(keys, ", "))
		}
		kv(b, 4, "P_Keys", line, width)
	}
}

// quoteDesc quotes a node description, as the ib.* checks name nodes.
func quoteDesc(s string) string {
	if s == "" {
		return "(no description)"
	}
	return fmt.Sprintf("%q", s)
}

// writeIBFabric writes, for the InfiniBand ports libibumad found that
// /sys/class/infiniband did not list (the host reader and libibumad can
// see different devices: a container, a simulator), a block each; and, on
// the live host with InfiniBand ports, why the fabric was not asked (a
// root's JSON says why too; its text stays as the files show the host).
func writeIBFabric(b *strings.Builder, r *InventoryReport, shown map[string]bool, width int) {
	ca := ""
	for _, f := range r.IBFabric {
		if shown[ibKey(f.CA, f.Port)] {
			continue
		}
		if f.CA != ca || ca == "" {
			b.WriteString("\n" + Escape(f.CA) + "  InfiniBand device as libibumad lists it\n")
			ca = f.CA
		}
		kv(b, 2, fmt.Sprintf("port %d", f.Port), orDash(f.State)+" ("+orDash(f.PhysState)+")", width)
		kv(b, 4, "LID", fmt.Sprintf("%d (0x%x), SM LID %d (0x%x)", f.LID, f.LID, f.SMLID, f.SMLID), width)
		kv(b, 4, "port GUID", f.PortGUID+", subnet prefix "+f.SubnetPrefix, width)
		writeIBFabricPort(b, f, width)
	}
	if r.IBFabricUnavailable == "" || len(r.IBFabric) > 0 || (r.Host.Root != "/" && r.Host.Root != "") {
		return
	}
	for _, d := range r.Inventory.RDMADevices {
		for _, p := range d.Ports {
			if p.LinkLayer == "InfiniBand" {
				b.WriteString("\n" + strings.Join(Wrap(Escape("InfiniBand fabric not asked: "+r.IBFabricUnavailable), width, 0, 2), "\n") + "\n")
				return
			}
		}
	}
}

func ibKey(ca string, port int) string { return fmt.Sprintf("%s/%d", ca, port) }
