package report

import (
	"encoding/json"
	"io"
)

// WriteJSON renders the report as the rdmadoctor.report/v1 JSON document.
// Every check is present with every field, whatever its status: a consumer
// never has to guess whether a missing key means "fine".
func WriteJSON(w io.Writer, r *Report) error {
	norm := *r
	norm.Checks = make([]CheckResult, len(r.Checks))
	for i, c := range r.Checks {
		if c.Details == nil {
			c.Details = []string{}
		}
		if c.Evidence == nil {
			c.Evidence = map[string]any{}
		}
		norm.Checks[i] = c
	}
	inv := &norm.Inventory
	if inv.PCIFunctions == nil {
		inv.PCIFunctions = []PCIFunction{}
	}
	if inv.RDMADevices == nil {
		inv.RDMADevices = []RDMADevice{}
	}
	if inv.Netdevs == nil {
		inv.Netdevs = []Netdev{}
	}
	if inv.GPUs == nil {
		inv.GPUs = []GPU{}
	}
	if inv.GPUNICMatrix == nil {
		inv.GPUNICMatrix = []GPUNICPair{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(&norm)
}
