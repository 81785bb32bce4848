/* A stand-in for NVIDIA's libcuda.so.1, and for AMD's libamdhip64.so and
 * libhsa-runtime64.so.1 (the same file serves as all three), over host
 * memory, for the GPU binding's and the GPU-memory probe's tests. "Device memory" is a memfd
 * mapped shared, so a dma-buf export is a descriptor of that memfd and the
 * fake libibverbs can map it; fake_gpu_owns tells the fake libibverbs
 * which addresses are "device memory" (a plain ibv_reg_mr of them fails
 * with EFAULT unless FAKE_PEERMEM=1, as without nvidia_peermem).
 *
 * Built with -DNO_DMABUF it lacks cuMemGetHandleForAddressRange, as CUDA
 * drivers before 11.7 do, and hsa_amd_portable_export_dmabuf. The HIP
 * calls share the CUDA calls' devices, memory and failures (fail=hipMalloc
 * fails hipMalloc); hsa_amd_portable_export_dmabuf exports the whole
 * allocation and returns the range's offset in it, as ROCm's does. The
 * environment picks the behaviour:
 *   FAKE_GPU       comma-separated flags:
 *                     nodevice     cuInit returns CUDA_ERROR_NO_DEVICE
 *                     count0       cuInit succeeds, no device
 *                     corrupt      cuMemcpyDtoH_v2 returns one byte changed
 *                     fail=CALL[:CODE]  CALL returns CODE (default 999)
 *   FAKE_GPU_BUSIDS  the GPUs' PCI bus ids, comma-separated
 *                   (default 0000:3B:00.0)
 *   FAKE_GPU_LOG   a file to which every allocation, free, retain,
 *                   release and export is appended, one line each, and at
 *                   each free "leak fd N" for an exported descriptor still
 *                   open
 * fake_gpu_dmabuf_offset tells the fake libibverbs where an exported
 * range starts in the memfd it maps.
 * Calls follow the driver's rules the probe depends on: memory calls need
 * a current context (CUDA_ERROR_INVALID_CONTEXT otherwise), a dma-buf
 * export needs a page-aligned range that starts an allocation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_SUPPORTED 801
#define CUDA_ERROR_UNKNOWN 999

static int flag(const char *name)
{
	const char *m = getenv("FAKE_GPU");
	if (!m)
		return 0;
	size_t n = strlen(name);
	for (const char *p = m; (p = strstr(p, name)); p += n)
		if ((p == m || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

/* failing returns the CUresult CALL must fail with, 0 if none. */
static CUresult failing(const char *call)
{
	const char *m = getenv("FAKE_GPU");
	if (!m)
		return 0;
	size_t n = strlen(call);
	for (const char *p = m; (p = strstr(p, "fail=")); p += 5) {
		if (strncmp(p + 5, call, n) || (p[5 + n] != 0 && p[5 + n] != ',' && p[5 + n] != ':'))
			continue;
		return p[5 + n] == ':' ? atoi(p + 6 + n) : CUDA_ERROR_UNKNOWN;
	}
	return 0;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char *fmt, ...)
{
	const char *path = getenv("FAKE_GPU_LOG");
	if (!path)
		return;
	FILE *f = fopen(path, "a");
	if (!f)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

#define MAX_GPUS 16
static char busids[MAX_GPUS][32];
static int ngpus = -1;
static int initialised;
static int retained[MAX_GPUS];
static __thread CUcontext current;
static char ctx_tokens[MAX_GPUS]; /* the contexts' addresses */

CUresult cuInit(unsigned flags)
{
	(void)flags;
	if (failing("cuInit"))
		return failing("cuInit");
	if (flag("nodevice"))
		return CUDA_ERROR_NO_DEVICE;
	const char *g = getenv("FAKE_GPU_BUSIDS");
	if (!g || !*g)
		g = "0000:3B:00.0";
	ngpus = 0;
	if (!flag("count0")) {
		char buf[512];
		snprintf(buf, sizeof buf, "%s", g);
		for (char *s = strtok(buf, ","); s && ngpus < MAX_GPUS; s = strtok(NULL, ","))
			snprintf(busids[ngpus++], sizeof busids[0], "%s", s);
	}
	initialised = 1;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
	*v = 12040;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (failing("cuDeviceGetCount"))
		return failing("cuDeviceGetCount");
	*n = ngpus;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (!initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	if (d < 0 || d >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, len, "Fake GPU %d", d);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d)
{
	if (d < 0 || d >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(bus, len, "%s", busids[d]);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
	if (d < 0 || d >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attr) {
	case 116: /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED */
		*v = 1;
		return CUDA_SUCCESS;
	case 124: /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
#ifdef NO_DMABUF
		return CUDA_ERROR_INVALID_VALUE; /* a driver older than the attribute */
#else
		*v = 1;
		return CUDA_SUCCESS;
#endif
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
	if (d < 0 || d >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	if (failing("cuDevicePrimaryCtxRetain"))
		return failing("cuDevicePrimaryCtxRetain");
	retained[d]++;
	*ctx = &ctx_tokens[d];
	logf_("retain %d", d);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	if (d < 0 || d >= ngpus || retained[d] == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	retained[d]--;
	logf_("release %d", d);
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	current = ctx;
	return CUDA_SUCCESS;
}

/* Device memory: memfds mapped shared. */
struct alloc {
	char *ptr;
	size_t size;
	int memfd;
	int exported[4];
	size_t exported_off[4]; /* where each exported range starts in memfd */
};
#define MAX_ALLOCS 64
static struct alloc allocs[MAX_ALLOCS];

static struct alloc *find(CUdeviceptr p, size_t n)
{
	for (int i = 0; i < MAX_ALLOCS; i++) {
		struct alloc *a = &allocs[i];
		if (a->ptr && (char *)(uintptr_t)p >= a->ptr && (char *)(uintptr_t)p + n <= a->ptr + a->size)
			return a;
	}
	return NULL;
}

/* fake_gpu_owns tells the fake libibverbs whether addr is device memory. */
int fake_gpu_owns(const void *addr, size_t len) { return find((CUdeviceptr)(uintptr_t)addr, len) != NULL; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (failing("cuMemAlloc_v2"))
		return failing("cuMemAlloc_v2");
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* The driver hands out 2 MiB-aligned ranges; page alignment will do. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (size + page - 1) / page * page;
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].ptr)
			continue;
		int fd = memfd_create("fakegpu", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)n))
			return CUDA_ERROR_OUT_OF_MEMORY;
		void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memset(m, 0xee, n); /* not zeroed, as device memory is not */
		allocs[i] = (struct alloc){.ptr = m, .size = n, .memfd = fd, .exported = {-1, -1, -1, -1}};
		*p = (CUdeviceptr)(uintptr_t)m;
		logf_("alloc %p", m);
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	for (int i = 0; i < MAX_ALLOCS; i++) {
		struct alloc *a = &allocs[i];
		if (a->ptr != (char *)(uintptr_t)p)
			continue;
		for (int k = 0; k < 4; k++)
			if (a->exported[k] >= 0 && fcntl(a->exported[k], F_GETFD) >= 0)
				logf_("leak fd %d", a->exported[k]);
		munmap(a->ptr, a->size);
		close(a->memfd);
		logf_("free %p", a->ptr);
		memset(a, 0, sizeof *a);
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (failing("cuMemcpyHtoD_v2"))
		return failing("cuMemcpyHtoD_v2");
	if (!find(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (failing("cuMemcpyDtoH_v2"))
		return failing("cuMemcpyDtoH_v2");
	if (!find(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	if (flag("corrupt") && n > 0)
		((unsigned char *)dst)[n / 2] ^= 0x5a;
	return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, int attr, CUdeviceptr p)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (failing("cuPointerSetAttribute"))
		return failing("cuPointerSetAttribute");
	if (attr != 6 || *(const unsigned *)value != 1 || !find(p, 1))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

#ifndef NO_DMABUF
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size, int type, unsigned long long flags)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (failing("cuMemGetHandleForAddressRange"))
		return failing("cuMemGetHandleForAddressRange");
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct alloc *a = find(p, size);
	if (type != 1 || flags != 0 || !a || p % page || size % page)
		return CUDA_ERROR_INVALID_VALUE;
	int fd = fcntl(a->memfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return CUDA_ERROR_UNKNOWN;
	for (int k = 0; k < 4; k++)
		if (a->exported[k] < 0 || fcntl(a->exported[k], F_GETFD) < 0) {
			a->exported[k] = fd;
			a->exported_off[k] = (size_t)((char *)(uintptr_t)p - a->ptr);
			break;
		}
	*(int *)handle = fd;
	logf_("export fd %d", fd);
	return CUDA_SUCCESS;
}

#endif

/* HIP and HSA, over the same devices and memory. hipSetDevice makes the
 * device's context current, as the HIP runtime does with the primary
 * context. */
typedef int hipError_t;

hipError_t hipInit(unsigned flags) { return cuInit(flags); }
hipError_t hipDriverGetVersion(int *v)
{
	*v = 60032830;
	return 0;
}
hipError_t hipGetDeviceCount(int *n)
{
	if (!initialised) {
		CUresult r = cuInit(0);
		if (r)
			return r;
	}
	if (ngpus == 0)
		return CUDA_ERROR_NO_DEVICE; /* hipErrorNoDevice is 100 too */
	return cuDeviceGetCount(n);
}
hipError_t hipDeviceGetName(char *name, int len, int d) { return cuDeviceGetName(name, len, d); }
hipError_t hipDeviceGetPCIBusId(char *bus, int len, int d) { return cuDeviceGetPCIBusId(bus, len, d); }
hipError_t hipSetDevice(int d)
{
	if (d < 0 || d >= ngpus)
		return CUDA_ERROR_INVALID_DEVICE;
	current = &ctx_tokens[d];
	return 0;
}
hipError_t hipMalloc(void **p, size_t size)
{
	if (failing("hipMalloc"))
		return failing("hipMalloc");
	CUdeviceptr d;
	CUresult r = cuMemAlloc_v2(&d, size);
	*p = (void *)(uintptr_t)d;
	return r;
}
hipError_t hipFree(void *p) { return cuMemFree_v2((CUdeviceptr)(uintptr_t)p); }
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind)
{
	switch (kind) {
	case 1: /* hipMemcpyHostToDevice */
		return cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dst, src, n);
	case 2: /* hipMemcpyDeviceToHost */
		return cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)src, n);
	}
	return CUDA_ERROR_INVALID_VALUE;
}
const char *hipGetErrorName(hipError_t r)
{
	const char *s = NULL;
	switch (r) {
	case 0:
		return "hipSuccess";
	case 100:
		return "hipErrorNoDevice";
	case 2:
		return "hipErrorOutOfMemory";
	}
	(void)s;
	return "hipErrorUnknown";
}

#ifndef NO_DMABUF
/* hsa_status_t: 0 success, 0x1001 HSA_STATUS_ERROR_INVALID_ARGUMENT */
int hsa_amd_portable_export_dmabuf(const void *ptr, size_t size, int *dmabuf, uint64_t *offset)
{
	if (failing("hsa_amd_portable_export_dmabuf"))
		return failing("hsa_amd_portable_export_dmabuf");
	struct alloc *a = find((CUdeviceptr)(uintptr_t)ptr, size);
	if (!a || !size)
		return 0x1001;
	int fd = fcntl(a->memfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return 0x1000;
	for (int k = 0; k < 4; k++)
		if (a->exported[k] < 0 || fcntl(a->exported[k], F_GETFD) < 0) {
			a->exported[k] = fd;
			a->exported_off[k] = 0; /* the caller registers at *offset */
			break;
		}
	*dmabuf = fd;
	*offset = (uint64_t)((const char *)ptr - a->ptr);
	logf_("export fd %d", fd);
	return 0;
}
#endif

/* fake_gpu_dmabuf_offset tells the fake libibverbs where the range an
 * exported descriptor stands for starts in the memfd behind it: a real
 * dma-buf begins at the exported range, this one at the allocation. */
long fake_gpu_dmabuf_offset(int fd)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		for (int k = 0; k < 4; k++)
			if (allocs[i].ptr && allocs[i].exported[k] == fd)
				return (long)allocs[i].exported_off[k];
	return 0;
}

CUresult cuGetErrorName(CUresult r, const char **s)
{
	static const struct {
		CUresult r;
		const char *name;
	} names[] = {
		{0, "CUDA_SUCCESS"}, {1, "CUDA_ERROR_INVALID_VALUE"}, {2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{3, "CUDA_ERROR_NOT_INITIALIZED"}, {100, "CUDA_ERROR_NO_DEVICE"}, {101, "CUDA_ERROR_INVALID_DEVICE"},
		{201, "CUDA_ERROR_INVALID_CONTEXT"}, {801, "CUDA_ERROR_NOT_SUPPORTED"}, {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{999, "CUDA_ERROR_UNKNOWN"},
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].r == r) {
			*s = names[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}
