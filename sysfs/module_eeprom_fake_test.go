package sysfs

// ModuleEEPROM makes the capture tests' fake live source answer module
// requests too: every interface of it is a virtual one without a module.
func (fakeLive) ModuleEEPROM(string) (ModuleEEPROM, error) {
	return ModuleEEPROM{Err: ErrNoModule}, nil
}
