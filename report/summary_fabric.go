package report

import (
	"fmt"
	"sort"
	"strings"
)

// The InfiniBand identities of a fleet: every port of one subnet has a LID
// of its own and every port a GUID of its own, and the hosts of one fabric
// share its subnet prefix. One report cannot see a clash with another host;
// summarize, reading them all, can.

// Fabric finding IDs, stable like the checks' finding IDs.
const (
	FabricDuplicateLID  = "fabric/duplicate-lid"
	FabricDuplicateGUID = "fabric/duplicate-port-guid"
	FabricPrefixDiffers = "fabric/subnet-prefix-differs"
)

// FabricFinding is an InfiniBand identity the fleet's reports disagree on:
// one LID (in one subnet) or one port GUID on ports of different hosts, or
// a host whose subnet prefix is not the fleet's majority's.
type FabricFinding struct {
	ID    string `json:"id"`
	Value string `json:"value"` // the LID, the port GUID, or the host's subnet prefix(es)
	// SubnetPrefix is the subnet of a duplicate LID; Majority the fleet's
	// prefix a differing host is compared with.
	SubnetPrefix string   `json:"subnet_prefix,omitempty"`
	Majority     string   `json:"majority,omitempty"`
	Nodes        []string `json:"nodes"`
	Ports        []string `json:"ports"` // "node01 mlx5_0/1"
	Message      string   `json:"message"`
}

// ibPortSeen is one InfiniBand port of one report.
type ibPortSeen struct {
	host, node, port   string
	lid                int
	guid, subnetPrefix string
}

// fabricIdentities collects the InfiniBand ports of the reports.
type fabricIdentities struct {
	ports []ibPortSeen
}

// collect records one report's InfiniBand ports that have a port GUID. A
// host is told apart by its host name (one host's report and its state file
// are one host), else by the node's name.
func (f *fabricIdentities) collect(r *Report, node string) {
	host := r.Host.Hostname
	if host == "" {
		host = node
	}
	for _, d := range r.Inventory.RDMADevices {
		for _, p := range d.Ports {
			if p.PortGUID == "" || (p.LinkLayer != "InfiniBand" && p.Transport != "InfiniBand") {
				continue
			}
			seen := ibPortSeen{host: host, node: node, port: fmt.Sprintf("%s/%d", d.Name, p.Port), lid: -1,
				guid: p.PortGUID, subnetPrefix: p.SubnetPrefix}
			// LID 0 is no LID yet; 0xffff is the permissive LID, never a port's.
			if p.LID != nil && *p.LID > 0 && *p.LID < 0xc000 {
				seen.lid = *p.LID
			}
			f.ports = append(f.ports, seen)
		}
	}
}

// findings are the clashes: duplicate LIDs, duplicate GUIDs, then the
// hosts whose subnet prefix differs, each sorted.
func (f *fabricIdentities) findings() []FabricFinding {
	out := []FabricFinding{}
	byLID := map[[2]string][]ibPortSeen{}
	byGUID := map[string][]ibPortSeen{}
	for _, p := range f.ports {
		if p.lid >= 0 {
			k := [2]string{p.subnetPrefix, fmt.Sprint(p.lid)}
			byLID[k] = append(byLID[k], p)
		}
		if p.guid != "0000:0000:0000:0000" {
			byGUID[p.guid] = append(byGUID[p.guid], p)
		}
	}
	for k, ps := range byLID {
		if fd, ok := duplicateAcrossHosts(FabricDuplicateLID, k[1], ps); ok {
			fd.SubnetPrefix = k[0]
			fd.Message = fmt.Sprintf("LID %s is on ports of %d hosts in subnet %s: %s", k[1], len(fd.Nodes), orQ(k[0]), strings.Join(fd.Ports, ", "))
			out = append(out, fd)
		}
	}
	for g, ps := range byGUID {
		if fd, ok := duplicateAcrossHosts(FabricDuplicateGUID, g, ps); ok {
			fd.Message = fmt.Sprintf("port GUID %s is on ports of %d hosts: %s", g, len(fd.Nodes), strings.Join(fd.Ports, ", "))
			out = append(out, fd)
		}
	}
	sortFabric(out)
	return append(out, f.prefixFindings()...)
}

// duplicateAcrossHosts is the finding for ports that share a value, when
// they are on more than one host (one host's ports may share a LID: SR-IOV
// virtual functions share their PF's).
func duplicateAcrossHosts(id, value string, ps []ibPortSeen) (FabricFinding, bool) {
	hosts := map[string]bool{}
	nodes := map[string]bool{}
	fd := FabricFinding{ID: id, Value: value, Nodes: []string{}, Ports: []string{}}
	for _, p := range ps {
		hosts[p.host] = true
		if !nodes[p.node] {
			nodes[p.node] = true
			fd.Nodes = append(fd.Nodes, p.node)
		}
		fd.Ports = append(fd.Ports, p.node+" "+p.port)
	}
	if len(hosts) < 2 {
		return FabricFinding{}, false
	}
	SortNodes(fd.Nodes)
	SortNodes(fd.Ports)
	return fd, true
}

// prefixFindings names the hosts whose InfiniBand subnet prefixes (the set
// of their ports') differ from the fleet's majority; none without one.
func (f *fabricIdentities) prefixFindings() []FabricFinding {
	byNode := map[string]map[string]bool{}
	for _, p := range f.ports {
		if p.subnetPrefix == "" {
			continue
		}
		if byNode[p.node] == nil {
			byNode[p.node] = map[string]bool{}
		}
		byNode[p.node][p.subnetPrefix] = true
	}
	values := map[string]string{}
	for n, set := range byNode {
		var ps []string
		for p := range set {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		values[n] = strings.Join(ps, ", ")
	}
	ol, ok := compare("IB subnet prefix", "", values)
	if !ok || ol.Majority == "" {
		return nil
	}
	var out []FabricFinding
	for _, v := range ol.Others {
		out = append(out, FabricFinding{ID: FabricPrefixDiffers, Value: v.Value, Majority: ol.Majority, Nodes: v.Nodes, Ports: []string{},
			Message: fmt.Sprintf("subnet prefix %s, not the fleet's %s (%d of %d hosts): %s", v.Value, ol.Majority, ol.MajorityNodes,
				len(values), strings.Join(v.Nodes, ", "))})
	}
	return out
}

func sortFabric(fs []FabricFinding) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].ID != fs[j].ID {
			return fs[i].ID < fs[j].ID
		}
		if fs[i].SubnetPrefix != fs[j].SubnetPrefix {
			return fs[i].SubnetPrefix < fs[j].SubnetPrefix
		}
		return naturalLess(fs[i].Value, fs[j].Value)
	})
}
