package report

// Inventory is what the host has, independent of any judgement.
type Inventory struct {
	PCIFunctions []PCIFunction `json:"pci_functions"`
	RDMADevices  []RDMADevice  `json:"rdma_devices"`
	Netdevs      []Netdev      `json:"netdevs"`
	// GPUs are the host's NVIDIA and AMD GPUs, and GPUNICMatrix the PCIe
	// relation of every GPU to every RDMA NIC (nvidia-smi topo -m's classes).
	GPUs         []GPU        `json:"gpus"`
	GPUNICMatrix []GPUNICPair `json:"gpu_nic_matrix"`
}

// NewInventory is an inventory with every list present and empty, as the
// JSON Schema wants it (a list, never null) before anything is added.
func NewInventory() Inventory {
	return Inventory{PCIFunctions: []PCIFunction{}, RDMADevices: []RDMADevice{}, Netdevs: []Netdev{},
		GPUs: []GPU{}, GPUNICMatrix: []GPUNICPair{}}
}

// GPU is one GPU function.
type GPU struct {
	Name     string   `json:"name"` // "GPU0", in PCI address order
	Address  string   `json:"address"`
	VendorID string   `json:"vendor_id"`
	DeviceID string   `json:"device_id"`
	Class    string   `json:"class"`
	Product  string   `json:"product"`
	Driver   string   `json:"driver"`
	NUMANode *int     `json:"numa_node"`
	Link     *PCILink `json:"link,omitempty"`
	// PairedNIC is the RDMA NIC the GPU would use (nearest first), "" when none.
	PairedNIC string `json:"paired_nic,omitempty"`
}

// GPUNICPair is the PCIe relation of one GPU and one RDMA NIC.
type GPUNICPair struct {
	GPU        string `json:"gpu"` // PCI address
	NIC        string `json:"nic"` // PCI address
	RDMADevice string `json:"rdma_device"`
	Relation   string `json:"relation"` // PIX, PXB, PHB, NODE, SYS, ?
	Meaning    string `json:"meaning"`
	Path       string `json:"path"` // which bridges or nodes decided it
	Paired     bool   `json:"paired"`
}

// PCIFunction is one RDMA-capable PCI function.
type PCIFunction struct {
	Address     string   `json:"address"`
	VendorID    string   `json:"vendor_id"` // "0x15b3"
	DeviceID    string   `json:"device_id"`
	Class       string   `json:"class"`
	Vendor      string   `json:"vendor"`
	Product     string   `json:"product"`
	Driver      string   `json:"driver"`
	NUMANode    *int     `json:"numa_node"`
	Link        *PCILink `json:"link,omitempty"`
	PhysFn      string   `json:"physfn,omitempty"` // set on an SR-IOV VF
	NumVFs      int      `json:"sriov_numvfs"`
	TotalVFs    int      `json:"sriov_totalvfs"`
	RDMADevices []string `json:"rdma_devices"`
	Netdevs     []string `json:"netdevs"`
}

// PCILink is a function's PCIe link as trained and as capable.
type PCILink struct {
	Speed    string `json:"speed"`
	Width    int    `json:"width"`
	MaxSpeed string `json:"max_speed"`
	MaxWidth int    `json:"max_width"`
}

// RDMADevice is one device of /sys/class/infiniband.
type RDMADevice struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // "hardware" | "software"
	Driver   string `json:"driver"`
	PCI      string `json:"pci,omitempty"`
	NodeType string `json:"node_type"`
	NodeGUID string `json:"node_guid"`
	SysGUID  string `json:"sys_image_guid,omitempty"`
	FWVer    string `json:"fw_ver,omitempty"`
	HCAType  string `json:"hca_type,omitempty"`
	BoardID  string `json:"board_id,omitempty"`
	// Function is what the device sits on: "PF", "VF", "SF" or "software".
	Function string `json:"function,omitempty"`
	// LAG is set on a RoCE LAG device (mlx5_bond_N).
	LAG   *LAG   `json:"lag,omitempty"`
	Ports []Port `json:"ports"`
}

// LAG is the bond a RoCE LAG device serves, and its slaves.
type LAG struct {
	Bond   string   `json:"bond"`
	Slaves []string `json:"slaves"`
}

// Port is one port of an RDMA device.
type Port struct {
	Port      int    `json:"port"`
	State     string `json:"state"`      // "ACTIVE"
	PhysState string `json:"phys_state"` // "LinkUp"
	Rate      string `json:"rate"`
	LinkLayer string `json:"link_layer"`
	// Transport is what the port speaks: InfiniBand, RoCE, iWARP, EFA (SRD),
	// Omni-Path or unknown — the kind every check judges it as.
	Transport string `json:"transport,omitempty"`
	// UpperNetdevs are the devices stacked on the port's netdev (VLAN,
	// macvlan, bond): their addresses make GIDs of the port too.
	UpperNetdevs []string `json:"upper_netdevs,omitempty"`
	LID          *int     `json:"lid,omitempty"`
	SMLID        *int     `json:"sm_lid,omitempty"`
	// PortGUID and SubnetPrefix are an InfiniBand port's GID 0 split in two
	// ("b83f:d203:00a1:2c6e", "fe80::/64"): what summarize compares across
	// the fleet (a GUID twice, a subnet prefix that differs).
	PortGUID     string `json:"port_guid,omitempty"`
	SubnetPrefix string `json:"subnet_prefix,omitempty"`
	Netdev       string `json:"netdev,omitempty"`
	// ActiveMTU is the RoCE MTU the netdev MTU allows (ibv_devinfo's active_mtu), 0 when unknown.
	ActiveMTU int   `json:"active_mtu,omitempty"`
	GIDs      []GID `json:"gids"`
}

// GID is one populated GID table entry.
type GID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type"`
	Netdev string `json:"netdev,omitempty"`
}

// Netdev is a network interface that carries an RDMA port.
type Netdev struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses"`
	// Module is the plug-in module its EEPROM names; nil when none was read.
	Module *Module `json:"module,omitempty"`
}

// Module is a netdev's plug-in module (QSFP, OSFP, SFP) as its EEPROM
// names it: what to order and what to find on the label.
type Module struct {
	Form     string `json:"form"`  // "QSFP28", "OSFP"
	Spec     string `json:"spec"`  // "SFF-8636", "CMIS 5.0"
	Media    string `json:"media"` // "optical", "passive copper"
	Vendor   string `json:"vendor"`
	Part     string `json:"part"`
	Revision string `json:"revision,omitempty"`
	Serial   string `json:"serial"`
	Firmware string `json:"firmware,omitempty"` // CMIS modules only
}
