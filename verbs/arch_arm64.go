package verbs

// sizeof(pthread_mutex_t) in glibc on aarch64.
const pthreadMutexSize = 48

const supportedArch = true
