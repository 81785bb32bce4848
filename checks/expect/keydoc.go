package expect

// KeyDoc documents one key of the expectations file for its reference
// (rdmadoctor-expect(5), docs/expectations.md's generated table): where it
// is written, an example value that the parser takes, and what it demands.
// TestKeyDocs parses every example and fails when a key the parser knows
// is missing here.
type KeyDoc struct {
	Scope   string // "class", "device", "port", "counters"
	Key     string // as written; <glob> and <n> stand for the unit
	Example string // a value Parse accepts
	Meaning string
}

// KeyDocs are every key, class keys first.
var KeyDocs = []KeyDoc{
	{"class", "hosts", "cx5-node* cx5-spare-??", "space-separated globs on the host name; the first class whose glob matches judges the host (required)"},
	{"class", "devices", "2", "the number of RDMA devices the host must have"},
	{"class", "skip", "counters.errors probe.cq_overflow", "checks not run on this class (IDs)"},
	{"class", "fail_on_warn", `["port.state"]`, "these checks' warnings are problems on this class, as --fail-on warn does for all"},
	{"class", "waive", `["port.state/one-lane"]`, "findings not counted on this class (finding IDs, rdmadoctor explain CHECK lists them); the check is judged on the rest"},
	{"class", "waive_reason", `"optics RMA open, ticket 4711"`, "why the waived findings are not counted (required with waive); reports show it beside each waived finding"},
	{"class", "roce_tc", "106", "the traffic class RoCE applications use (DSCP<<2), 0..255: roce.lossless judges the priority it maps to"},
	{"class", "lossless", "true", "PFC, trust and ECN faults fail instead of warn"},
	{"class", "gpu_nic_max_distance", "NODE", "the farthest each GPU's RDMA NIC may be, in `nvidia-smi topo -m`'s classes nearest first (PIX, PXB, PHB, NODE, SYS): gpu.nic_affinity fails a GPU whose NIC is farther, such as a NIC only across the inter-socket link (SYS) that otherwise warns"},
	{"class", "pkeys", `["0x8001", "0x8002"]`, "InfiniBand partitions every IB port must be a full member of: ib.pkey reads the port's P_Key table through SMPs and fails a key missing or held as a limited member"},
	{"class", "ib_peers", `["0x0002c90300a1b2c3", "storage-0[12] HCA-1"]`, "InfiniBand ports every IB port must have a path to, by port GUID or by node description (a glob, as switch takes; quote one with blanks): ib.path resolves a description through the SA's NodeRecords (every port of every node it matches; none fails), asks the SA for a PathRecord to each port (in the port's subnet) and fails one that does not resolve"},
	{"class", "switch", `"leaf-03*"`, "the node description of the switch (or HCA) at the other end of every InfiniBand port's cable, a glob or a list: ib.far_end reads it by directed-route SMP and fails another neighbour (a cable on the wrong switch or rail)"},
	{"class", "switch_port", "17", "the port number on that neighbour every InfiniBand port's cable must land on (ib.far_end)"},
	{"device", "<glob>.fw", `["16.35.*", "16.36.2000"]`, "firmware version (a literal, a glob or a list); matched against fw_ver without the PSID mlx5 adds in parentheses"},
	{"device", "<glob>.pcie_speed", "8.0 GT/s PCIe", "the PCIe link speed of the device's function"},
	{"device", "<glob>.pcie_width", "16", "the PCIe link width of the device's function"},
	{"device", "<glob>.ports", "1", "the number of ports the device must have"},
	{"port", "<glob>/<n>.link_layer", "Ethernet", "the port's link layer (Ethernet or InfiniBand); <n> is a port number or *"},
	{"port", "<glob>/<n>.rate", "100", "the port's rate in Gb/s, the number sysfs rate shows"},
	{"port", "<glob>/<n>.width", "4X", "the port's trained width"},
	{"port", "<glob>/<n>.mtu", "9000", "the netdev MTU (RoCE) or the active MTU (InfiniBand)"},
	{"port", "<glob>/<n>.pfc_priority", "3", "the priority PFC must be on for"},
	{"port", "<glob>/<n>.unused", "true", "the port is unused on purpose: never judged"},
	{"port", "<glob>/<n>.module_vendor", `["Mellanox", "NVIDIA"]`, "the vendor name the port's plug-in module (or each LAG slave's) must carry in its EEPROM; link.optics fails another"},
	{"port", "<glob>/<n>.module_part", "MMA1B00-C100D", "the module's part number (a literal, a glob or a list)"},
	{"port", "<glob>/<n>.module_firmware", `"46.*"`, "the module's firmware: CMIS's active firmware (major.minor); SFF-8636 and SFF-8472 modules have none, and their vendor revision is matched instead"},
	{"counters", "counters.<counter>", "{ rate_per_hour = 240, absolute = 1000 }", "counters.errors' thresholds for one counter: the rise per hour between runs above which it fails (0: any rise), and the count since its baseline beyond which a rise fails"},
	{"counters", "counters.<counter>.rate_per_hour", "240", "one threshold a line: the rise per hour"},
	{"counters", "counters.<counter>.absolute", "1000", "one threshold a line: the count since the baseline"},
	{"counters", "counters.clean_runs", "5", "clean runs in a row before a counter that failed passes again (at most 100)"},
}
