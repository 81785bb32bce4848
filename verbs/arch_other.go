//go:build !amd64 && !arm64

package verbs

// The struct mirrors are verified on 64-bit x86 and ARM only; elsewhere
// Open refuses rather than guess a layout.
const pthreadMutexSize = 40

const supportedArch = false
