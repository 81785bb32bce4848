package verbs

import "unsafe"

// AH is an address handle (struct ibv_ah): where a UD SEND goes. A UD work
// request carries one in wr.ud.ah; a UD QP has no address of its own.
type AH struct {
	PD  *PD
	ptr uintptr
}

// CreateAH calls ibv_create_ah. On RoCE the kernel resolves the
// destination GID to a MAC address here, so a GID without a route or a
// neighbour fails now (EHOSTUNREACH, ENODATA) rather than at the send.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	c := pd.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	ca := allocT[AHAttr](a)
	*ca = attr
	p, err := c.lib.callPtr("ibv_create_ah", c.lib.createAH, pd.ptr, uintptr(unsafe.Pointer(ca)))
	if err != nil {
		return nil, err
	}
	return &AH{PD: pd, ptr: p}, nil
}

// Destroy calls ibv_destroy_ah.
func (ah *AH) Destroy() error {
	if ah.ptr == 0 {
		return nil
	}
	c := ah.PD.Context
	err := c.lib.callInt("ibv_destroy_ah", c.lib.destroyAH, ah.ptr)
	if err == nil {
		ah.ptr = 0
	}
	return err
}

// setUD writes a UD destination into the wr.ud member of a work request's
// wr union: the address handle, the destination QP and its Q_Key.
func (w *cSendWR) setUD(ah uintptr, remoteQPN, remoteQKey uint32) {
	base := unsafe.Pointer(&w.WR[0])
	*(*uintptr)(unsafe.Add(base, wrUDAH)) = ah
	*(*uint32)(unsafe.Add(base, wrUDRemoteQPN)) = remoteQPN
	*(*uint32)(unsafe.Add(base, wrUDRemoteQKey)) = remoteQKey
}
