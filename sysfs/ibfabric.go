package sysfs

// IBFabricFacts is what the fabric answered, through management datagrams
// from the live host, about each of its InfiniBand ports: what inventory
// shows of the control plane, and a snapshot replays. GUIDs are written as
// sysfs writes them ("0002:c903:00a1:b2c3") and subnet prefixes as IPv6
// prefixes ("fe80::/64"), so that a redacted snapshot maps them as it maps
// the same values in its files.
type IBFabricFacts struct {
	Ports []IBFabricPort `json:"ports"`
}

// IBFabricPort is one InfiniBand port and what the fabric said of it. Each
// part that could not be asked carries its own error; the others stand.
type IBFabricPort struct {
	CA           string `json:"ca"`
	Port         int    `json:"port"`
	State        string `json:"state"`      // "Active", as libibumad read it
	PhysState    string `json:"phys_state"` // "LinkUp"
	LID          uint16 `json:"lid"`
	SMLID        uint16 `json:"sm_lid"`
	PortGUID     string `json:"port_guid"`
	SubnetPrefix string `json:"subnet_prefix"`
	// SM is the SM that answers SMInfo at the port's SM LID.
	SM *IBSMAnswer `json:"sm,omitempty"`
	// SMs are the SMs the SA lists (SMInfoRecord GetTable).
	SMs *IBSMList `json:"sms,omitempty"`
	// Neighbour is the node one hop out through the port (directed route).
	Neighbour *IBNeighbour `json:"neighbour,omitempty"`
	// PKeys is the port's P_Key table, read by SMP from its own agent.
	PKeys *IBPKeyTable `json:"pkeys,omitempty"`
}

// IBSM is one subnet manager: its port's LID and GUID, priority, state and
// (where asked) its node's description.
type IBSM struct {
	LID      uint16 `json:"lid"`
	GUID     string `json:"guid"`
	Priority uint8  `json:"priority"`
	State    string `json:"state"` // "MASTER", "STANDBY", ...
	NodeDesc string `json:"node_desc,omitempty"`
}

// IBSMAnswer is the SM at a port's SM LID, or why it is unknown (its
// node description alone can be missing, with the error saying why).
type IBSMAnswer struct {
	LID      uint16 `json:"lid,omitempty"`
	GUID     string `json:"guid,omitempty"`
	Priority uint8  `json:"priority,omitempty"`
	State    string `json:"state,omitempty"`
	NodeDesc string `json:"node_desc,omitempty"`
	Error    string `json:"error,omitempty"`
}

// IBSMList is the SMs the SA knows, or why they are unknown.
type IBSMList struct {
	SMs   []IBSM `json:"sms"`
	Error string `json:"error,omitempty"`
}

// IBNeighbour is the node at the other end of a port's cable, and its
// port as it sees the link.
type IBNeighbour struct {
	NodeType  string `json:"node_type,omitempty"` // "switch", "CA", "router"
	NodeGUID  string `json:"node_guid,omitempty"`
	NodeDesc  string `json:"node_desc,omitempty"`
	Port      int    `json:"port,omitempty"`
	State     string `json:"state,omitempty"`
	PhysState string `json:"phys_state,omitempty"`
	Width     string `json:"width,omitempty"` // "4X"
	Speed     string `json:"speed,omitempty"` // "EDR"
	Error     string `json:"error,omitempty"`
}

// IBPKeyTable is a port's P_Key table (its valid entries), or why it is
// unknown.
type IBPKeyTable struct {
	Keys  []IBPKey `json:"keys"`
	Error string   `json:"error,omitempty"`
}

// IBPKey is one P_Key table entry: the key with its membership bit, and
// that bit spelled out.
type IBPKey struct {
	PKey       string `json:"pkey"` // "0xffff"
	FullMember bool   `json:"full_member"`
}
