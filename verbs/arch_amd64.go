package verbs

// sizeof(pthread_mutex_t) in glibc and musl on x86-64.
const pthreadMutexSize = 40

const supportedArch = true
