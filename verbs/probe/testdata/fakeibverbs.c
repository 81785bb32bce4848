/* A stand-in for libibverbs.so.1 that misbehaves on demand, for the probe
 * runner's tests. It exports every symbol the binding resolves; the
 * environment variable FAKE_IBV picks the behaviour:
 *   enosys       ibv_get_device_list returns NULL with errno ENOSYS
 *   two          two devices, and a loader warning on stderr
 *   hang-list    ibv_get_device_list never returns
 *   segv-list    ibv_get_device_list dereferences NULL
 *   hang-open    one device; ibv_open_device never returns
 *   eacces-open  one device; ibv_open_device fails with EACCES
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/* The header wraps these two in macros over inlines. */
#undef ibv_query_port
#undef ibv_reg_mr

static const char *mode(void)
{
	const char *m = getenv("FAKE_IBV");
	return m ? m : "";
}

static struct ibv_device devs[2];
static struct ibv_device *list[3];

static void fill(struct ibv_device *d, const char *name, const char *uverbs)
{
	memset(d, 0, sizeof(*d));
	d->node_type = IBV_NODE_CA;
	d->transport_type = IBV_TRANSPORT_IB;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->dev_name, sizeof(d->dev_name), "%s", uverbs);
	snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/sys/class/infiniband/%s", name);
}

struct ibv_device **ibv_get_device_list(int *num)
{
	const char *m = mode();
	if (!strcmp(m, "enosys")) {
		errno = ENOSYS;
		return NULL;
	}
	if (!strcmp(m, "hang-list"))
		for (;;)
			pause();
	if (!strcmp(m, "segv-list"))
		*(volatile int *)0 = 1;
	int n = 0;
	if (!strcmp(m, "two")) {
		fprintf(stderr, "libibverbs: Warning: couldn't load driver 'libfake-rdmav34.so': libfake-rdmav34.so: cannot open shared object file\n");
		fill(&devs[0], "mlx5_0", "uverbs0");
		fill(&devs[1], "mlx5_1", "uverbs1");
		n = 2;
	} else if (!strcmp(m, "hang-open") || !strcmp(m, "eacces-open")) {
		fill(&devs[0], "fake0", "uverbs0");
		n = 1;
	}
	for (int i = 0; i < n; i++)
		list[i] = &devs[i];
	list[n] = NULL;
	if (num)
		*num = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **l) { (void)l; }

__be64 ibv_get_device_guid(struct ibv_device *d)
{
	return htobe64(d == &devs[0] ? 0x0002c90300a1b2c3ULL : 0x0002c90300a1b2c4ULL);
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	(void)d;
	if (!strcmp(mode(), "hang-open"))
		for (;;)
			pause();
	errno = !strcmp(mode(), "eacces-open") ? EACCES : ENOSYS;
	return NULL;
}

#define FAIL_INT(name, ...) int name(__VA_ARGS__) { return ENOSYS; }
#define FAIL_PTR(type, name, ...) type name(__VA_ARGS__) { errno = ENOSYS; return NULL; }

FAIL_INT(ibv_close_device, struct ibv_context *c)
FAIL_INT(ibv_query_device, struct ibv_context *c, struct ibv_device_attr *a)
FAIL_INT(ibv_query_port, struct ibv_context *c, uint8_t p, struct _compat_ibv_port_attr *a)
FAIL_INT(ibv_query_gid, struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
FAIL_PTR(struct ibv_pd *, ibv_alloc_pd, struct ibv_context *c)
FAIL_INT(ibv_dealloc_pd, struct ibv_pd *p)
FAIL_PTR(struct ibv_mr *, ibv_reg_mr, struct ibv_pd *p, void *a, size_t l, int f)
FAIL_INT(ibv_dereg_mr, struct ibv_mr *m)
FAIL_PTR(struct ibv_comp_channel *, ibv_create_comp_channel, struct ibv_context *c)
FAIL_INT(ibv_destroy_comp_channel, struct ibv_comp_channel *c)
FAIL_PTR(struct ibv_cq *, ibv_create_cq, struct ibv_context *c, int n, void *x, struct ibv_comp_channel *ch, int v)
FAIL_INT(ibv_destroy_cq, struct ibv_cq *c)
FAIL_INT(ibv_get_cq_event, struct ibv_comp_channel *c, struct ibv_cq **q, void **x)
void ibv_ack_cq_events(struct ibv_cq *c, unsigned int n) { (void)c; (void)n; }
FAIL_PTR(struct ibv_qp *, ibv_create_qp, struct ibv_pd *p, struct ibv_qp_init_attr *a)
FAIL_INT(ibv_modify_qp, struct ibv_qp *q, struct ibv_qp_attr *a, int m)
FAIL_INT(ibv_query_qp, struct ibv_qp *q, struct ibv_qp_attr *a, int m, struct ibv_qp_init_attr *i)
FAIL_INT(ibv_destroy_qp, struct ibv_qp *q)
FAIL_INT(ibv_get_async_event, struct ibv_context *c, struct ibv_async_event *e)
void ibv_ack_async_event(struct ibv_async_event *e) { (void)e; }
