package sysfs

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
)

// maxDCBQueries bounds the DCB questions one capture asks: a host with
// hundreds of container veths must not make a snapshot slow.
const maxDCBQueries = 256

// GatherFacts collects every non-file fact this Host can answer into one
// Facts value, the content of a snapshot's facts file. On a live host it asks
// the kernel (netlink) for each fact, and stats the /dev nodes in the
// directories of the recorded /dev paths (recorded is Recorded()'s answer);
// on a fixture or snapshot root it copies the facts file. What cannot be
// gathered is named in Unavailable with the reason, never dropped silently.
// The libibverbs enumeration is not made here (it runs in the verbs child
// process): the caller adds it.
//
// When a field is added to Facts, its live answer belongs here too.
func (h *Host) GatherFacts(recorded map[string]Access) *Facts {
	if !h.Live() {
		return h.copyFacts()
	}
	f := &Facts{Schema: FactsSchema, Unavailable: map[string]string{}}
	if name, err := os.Hostname(); err == nil {
		f.Hostname = name
	} else {
		f.Unavailable["hostname"] = err.Error()
	}
	nds, err := h.Netdevs()
	if err != nil {
		f.Unavailable["netdevs"] = err.Error()
	} else {
		f.Netdevs = nds
		f.DCB = map[string]DCB{}
		for i, nd := range nds {
			if i >= maxDCBQueries {
				f.Unavailable["dcb"] = fmt.Sprintf("asked only the first %d interfaces", maxDCBQueries)
				break
			}
			d, err := h.DCB(nd.Name)
			if err != nil {
				f.Unavailable["dcb:"+nd.Name] = err.Error()
				continue
			}
			f.DCB[nd.Name] = d
		}
		f.ModuleEEPROMs = h.gatherModuleEEPROMs(nds, f.Unavailable)
		gatherEthtool(h, f, nds)
	}
	if sys, err := h.RDMASystem(); err != nil {
		f.Unavailable["rdma_system"] = err.Error()
	} else {
		f.RDMASystem = &sys
	}
	if res, err := h.RDMAResources(); err != nil {
		f.Unavailable["rdma_resources"] = err.Error()
	} else {
		f.RDMAResources = res
	}
	if dh, err := h.DevlinkHealth(); err != nil {
		f.Unavailable["devlink_health"] = err.Error()
	} else {
		f.DevlinkHealth = dh
	}
	if dirs := devDirs(recorded); len(dirs) > 0 {
		f.DevNodes = CaptureDevNodes(dirs...)
	}
	return f
}

// devDirs are the /dev directories a check looked in: a listed directory,
// or the directory of a node looked at.
func devDirs(recorded map[string]Access) []string {
	seen := map[string]bool{}
	for p, a := range recorded {
		if p != "/dev" && !strings.HasPrefix(p, "/dev/") {
			continue
		}
		d := p
		if a&AccessList == 0 {
			d = path.Dir(p)
		}
		if d != "/" {
			seen[d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// copyFacts deep-copies the facts file of a fixture or snapshot root (a JSON
// round trip keeps every field, including ones added later).
func (h *Host) copyFacts() *Facts {
	out := &Facts{Schema: FactsSchema}
	if h.facts == nil {
		out.Unavailable = map[string]string{}
		for _, k := range []string{"netdevs", "dcb", "ethtool", "rdma_system", "rdma_resources", "libibverbs", "dev_nodes", "devlink_health"} {
			out.Unavailable[k] = "the source root has no " + FactsFile
		}
		return out
	}
	data, err := json.Marshal(h.facts)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return &Facts{Schema: FactsSchema, Unavailable: map[string]string{"facts": "copy " + FactsFile + ": " + err.Error()}}
	}
	return out
}

// UnavailableKeys lists the facts a capture could not gather, sorted.
func (f *Facts) UnavailableKeys() []string {
	keys := make([]string, 0, len(f.Unavailable))
	for k := range f.Unavailable {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
