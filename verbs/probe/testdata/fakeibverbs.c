/* A stand-in for libibverbs.so.1 that misbehaves on demand, for the probe
 * runner's tests. It exports every symbol the binding resolves; the
 * environment variable FAKE_IBV picks the behaviour:
 *   enosys       ibv_get_device_list returns NULL with errno ENOSYS
 *   two          two devices, and a loader warning on stderr
 *   hang-list    ibv_get_device_list never returns
 *   segv-list    ibv_get_device_list dereferences NULL
 *   hang-open    one device; ibv_open_device never returns
 *   eacces-open  one device; ibv_open_device fails with EACCES
 * and a working loopback device "fake0" (InfiniBand, port 1 ACTIVE, LID 1:
 * RC QPs, SENDs delivered between the QPs, CQs that overflow into
 * IBV_EVENT_CQ_ERR on the async fd, EBUSY for frees under a live QP, an
 * error completion for an lkey that is not registered) in these modes:
 *   loop            healthy
 *   iwarp           an RNIC (IBV_TRANSPORT_IWARP) whose RC QPs refuse
 *                   INIT→RTR and RTR→RTS, as siw does without rdma_cm
 *   silent          SENDs are accepted and never complete
 *   send-err        every SEND completes with IBV_WC_RETRY_EXC_ERR and
 *                   nothing arrives
 *   cq-err-partial  once a CQ overflows, the sender's later SENDs are
 *                   flushed silently (nothing more arrives)
 *   cq-page         every CQ is granted 4096 entries, whatever was asked
 *   poll-neg        ibv_poll_cq returns -2, as mlx5 does for a CQ in error
 * UD QPs deliver through address handles as the real stack does: the
 * receiver drops a SEND whose Q_Key is not its own (and counts it in the
 * port's qkey_viol_cntr), writes the payload after the 40-byte GRH area,
 * reports byte_len = payload + 40 (IBV_WC_GRH when the handle is global),
 * and completes a receive without room for the GRH with
 * IBV_WC_LOC_LEN_ERR. Modes that change the device or break UD:
 *   roce             link layer Ethernet, GID 0 is ::ffff:192.0.2.1
 *   efa              node type UNSPECIFIED, link layer unspecified, LID 0,
 *                    a GID at index 0; RC QPs fail with EOPNOTSUPP
 *   ud-bytelen       (RoCE) byte_len counts the payload alone
 *   ud-nogrh         (RoCE) IBV_WC_GRH never set
 *   ud-offset0       (RoCE) the payload lands at offset 0
 *   ud-norecv        (RoCE) UD SENDs complete but never arrive
 *   ud-qkey-ignored  (RoCE) the receiver accepts any Q_Key
 *   ud-silent-len    (RoCE) a receive without GRH room is dropped silently
 *   ud-refused       (RoCE) UD QPs fail with EOPNOTSUPP, as on qedr
 * GPU memory (with testdata/fakegpu.c of package gpu loaded, whose
 * fake_gpu_owns tells its "device memory" from host memory):
 *   ibv_reg_mr of device memory fails with EFAULT, as the kernel's
 *   pin_user_pages does without a peer-memory client, unless
 *   FAKE_PEERMEM=1 (nvidia_peermem loaded);
 *   ibv_reg_dmabuf_mr maps the dma-buf (a memfd here) and translates the
 *   MR's iova range to it; FAKE_IBV_DMABUF=eopnotsupp makes it fail as
 *   a provider or kernel without dma-buf MRs does. Built with
 *   -DNO_REG_DMABUF the library lacks it, as before rdma-core 34.
 * Receives check their lkey: a receive into memory no MR covers
 * completes with IBV_WC_LOC_PROT_ERR.
 * Two processes (a peer session's server and client children) reach each
 * other's RC QPs across the process boundary in the peer modes: each
 * process binds an abstract unix datagram socket named after the high
 * bits of its QP numbers, and a thread in it plays the responder (SEND
 * into a posted receive, WRITE and READ checked against the rkey and the
 * region, an ACK or a NAK back). The sender's completion comes with the
 * ACK, as on a real RC QP:
 *   peer             healthy
 *   peer-badrkey     WRITE and READ are NAKed with IBV_WC_REM_ACCESS_ERR
 *   peer-silent      nothing arrives and nothing is acknowledged (a link
 *                    that drops everything, or an MTU that never fits)
 *   peer-roce        healthy, link layer Ethernet; GID 0 is the IPv4 address
 *                    in FAKE_IBV_GID4 (default 192.0.2.1), IPv4-mapped
 * and in every peer mode FAKE_IBV_DROP_AFTER=N makes a process drop every
 * message after its Nth (a link that goes down mid-run), and
 * FAKE_IBV_DROP_LARGER=N every message of more than N bytes (a hop whose
 * MTU is below the hosts': small packets cross, full ones never do).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

/* The header wraps these two in macros over inlines. */
#undef ibv_query_port
#undef ibv_reg_mr

static const char *mode(void)
{
	const char *m = getenv("FAKE_IBV");
	return m ? m : "";
}

static int is(const char *m) { return !strcmp(mode(), m); }

static int ud_fault_mode(void) { return !strncmp(mode(), "ud-", 3); }

/* RoCE link layer: the roce mode and every UD fault mode. */
static int roce_mode(void) { return is("roce") || is("peer-roce") || ud_fault_mode(); }

static int peer_mode(void) { return !strncmp(mode(), "peer", 4); }

static int loop_mode(void)
{
	return peer_mode() || is("loop") || is("iwarp") || is("silent") || is("send-err") || is("cq-err-partial") ||
	       is("cq-page") || is("poll-neg") || roce_mode() || is("efa");
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
	} else if (loop_mode()) {
		fill(&devs[0], "fake0", "uverbs0");
		if (is("iwarp")) {
			devs[0].node_type = IBV_NODE_RNIC;
			devs[0].transport_type = IBV_TRANSPORT_IWARP;
		}
		if (is("efa")) {
			devs[0].node_type = IBV_NODE_UNSPECIFIED;
			devs[0].transport_type = IBV_TRANSPORT_UNSPECIFIED;
		}
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

/* The loopback device. */

struct fctx {
	struct ibv_context ctx;
	int event_wfd; /* write end of the async fd's pipe */
};

struct fcq {
	struct ibv_cq cq;
	struct ibv_wc *ring;
	int head, count, users;
};

#define MAX_RECV 8192

struct fqp {
	struct ibv_qp qp;
	uint32_t dest;
	uint32_t qkey; /* UD */
	int broken; /* cq-err-partial: flushes everything after an overflow */
	uint64_t rid[MAX_RECV];
	uint64_t raddr[MAX_RECV];
	uint32_t rlen[MAX_RECV];
	uint32_t rkey_[MAX_RECV]; /* the receive's lkey */
	int rhead, rcount;
};

struct fpd {
	struct ibv_pd pd;
	int users;
};

#define MAX_QPS 256
static struct fqp *qps[MAX_QPS];

#define MAX_MRS 256
static struct ibv_mr *mrs[MAX_MRS];
/* The MR's address range as the device sees it (addr for ibv_reg_mr, the
 * iova for a dma-buf MR) and where that range is in this process. */
static uint64_t mr_base[MAX_MRS];
static char *mr_host[MAX_MRS];
static size_t mr_maplen[MAX_MRS]; /* a dma-buf mapping to unmap, or 0 */
static uint32_t next_key = 0x100, next_qpn = 0x11;

struct event_rec {
	enum ibv_event_type type;
	void *element;
};

struct fah {
	struct ibv_ah ah;
	int is_global;
};

static uint32_t qkey_violations;

/* One lock over every table and ring: the peer modes' responder thread
 * touches them as well as the caller. */
static pthread_mutex_t big_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
#define LOCK() pthread_mutex_lock(&big_lock)
#define UNLOCK() pthread_mutex_unlock(&big_lock)

static void raise_event(struct ibv_context *c, enum ibv_event_type type, void *element)
{
	struct event_rec r = {type, element};
	if (write(((struct fctx *)c)->event_wfd, &r, sizeof r) != sizeof r)
		abort();
}

/* push adds a completion; a full CQ loses it and raises IBV_EVENT_CQ_ERR. */
static int push(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct fcq *f = (struct fcq *)cq;
	if (f->count >= cq->cqe) {
		raise_event(cq->context, IBV_EVENT_CQ_ERR, cq);
		return -1;
	}
	f->ring[(f->head + f->count) % cq->cqe] = *wc;
	f->count++;
	return 0;
}

static int fake_poll_cq_unlocked(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fcq *f = (struct fcq *)cq;
	if (is("poll-neg"))
		return -2;
	int k = 0;
	while (k < n && f->count > 0) {
		wc[k++] = f->ring[f->head];
		f->head = (f->head + 1) % cq->cqe;
		f->count--;
	}
	return k;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	LOCK();
	int r = fake_poll_cq_unlocked(cq, n, wc);
	UNLOCK();
	return r;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited) { (void)cq; (void)solicited; return 0; }

/* host_of translates [addr, addr+len) of the MR with lkey to this
 * process's memory; NULL when no MR with that key covers it. */
static char *host_of(uint32_t lkey, uint64_t addr, uint32_t len)
{
	for (int i = 0; i < MAX_MRS; i++) {
		struct ibv_mr *m = mrs[i];
		if (m && m->lkey == lkey && addr >= mr_base[i] && addr + len <= mr_base[i] + m->length)
			return mr_host[i] + (addr - mr_base[i]);
	}
	return NULL;
}

static int key_ok(uint32_t lkey, uint64_t addr, uint32_t len) { return host_of(lkey, addr, len) != NULL; }

static struct fqp *find_qp(uint32_t qpn)
{
	for (int i = 0; i < MAX_QPS; i++)
		if (qps[i] && qps[i]->qp.qp_num == qpn)
			return qps[i];
	return NULL;
}

/* ud_deliver hands one UD SEND of len bytes at src to the QP it names. */
static void ud_deliver(struct ibv_qp *qp, struct ibv_send_wr *wr, uint32_t len)
{
	struct fqp *peer = find_qp(wr->wr.ud.remote_qpn);
	struct fah *ah = (struct fah *)wr->wr.ud.ah;
	if (!peer || !ah || is("ud-norecv") || peer->qp.state < IBV_QPS_RTR || peer->rcount == 0)
		return; /* UD: nobody tells the sender */
	if (wr->wr.ud.remote_qkey != peer->qkey && !is("ud-qkey-ignored")) {
		qkey_violations++;
		return;
	}
	int h = peer->rhead;
	struct ibv_wc rwc = {.wr_id = peer->rid[h], .opcode = IBV_WC_RECV, .qp_num = peer->qp.qp_num,
			     .src_qp = qp->qp_num, .byte_len = len + 40};
	if (peer->rlen[h] < len + 40) {
		if (is("ud-silent-len"))
			return;
		rwc.status = IBV_WC_LOC_LEN_ERR;
		rwc.byte_len = 0;
		peer->qp.state = IBV_QPS_ERR;
	} else {
		char *dst = host_of(peer->rkey_[h], peer->raddr[h], peer->rlen[h]);
		memset(dst, 0x47, 40);
		memcpy(dst + (is("ud-offset0") ? 0 : 40), host_of(wr->sg_list[0].lkey, wr->sg_list[0].addr, len), len);
		if (ah->is_global && !is("ud-nogrh"))
			rwc.wc_flags |= IBV_WC_GRH;
		if (is("ud-bytelen"))
			rwc.byte_len = len;
	}
	peer->rhead = (h + 1) % MAX_RECV;
	peer->rcount--;
	push(peer->qp.recv_cq, &rwc);
}

/* The peer modes' wire between processes. */

enum { W_SEND = 1, W_WRITE, W_READ_REQ, W_READ_RESP, W_ACK };

struct wmsg {
	uint32_t op, dst_qpn, src_qpn, len;
	uint64_t raddr, laddr, wr_id;
	uint32_t rkey, status, signaled, wc_opcode, noack, pad;
};

#define WIRE_MAX (60 * 1024)
static int wire_fd = -1;

static socklen_t wire_name(struct sockaddr_un *a, uint32_t qpn)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "fakeibv-%04x", qpn >> 8);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

/* wire_send sends one message to the process that owns dst_qpn; -1 when
 * that process is gone. A full socket is waited out without the lock, so
 * the thread here can go on draining ours. */
static int wire_send(uint32_t dst_qpn, struct wmsg *m, const void *data, uint32_t len)
{
	struct sockaddr_un a;
	socklen_t l = wire_name(&a, dst_qpn);
	struct iovec iov[2] = {{m, sizeof *m}, {(void *)data, len}};
	struct msghdr h = {.msg_name = &a, .msg_namelen = l, .msg_iov = iov, .msg_iovlen = data && len ? 2 : 1};
	for (int i = 0; i < 20000; i++) {
		if (sendmsg(wire_fd, &h, MSG_DONTWAIT) >= 0)
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		UNLOCK();
		usleep(100);
		LOCK();
	}
	return -1;
}

static struct ibv_mr *rkey_mr(uint32_t rkey, uint64_t addr, uint32_t len)
{
	for (int i = 0; i < MAX_MRS; i++) {
		struct ibv_mr *m = mrs[i];
		if (m && m->rkey == rkey && addr >= (uint64_t)(uintptr_t)m->addr &&
		    addr + len <= (uint64_t)(uintptr_t)m->addr + m->length)
			return m;
	}
	return NULL;
}

static struct fqp *find_qp(uint32_t qpn);

/* wire_respond plays the responder for one request. */
static void wire_respond(struct wmsg *m, char *data)
{
	struct wmsg ack = {.op = W_ACK, .dst_qpn = m->src_qpn, .src_qpn = m->dst_qpn, .wr_id = m->wr_id,
			   .signaled = m->signaled, .wc_opcode = m->wc_opcode, .laddr = m->laddr, .len = m->len};
	struct fqp *q = find_qp(m->dst_qpn);
	const void *payload = NULL;
	if (!q || q->qp.state < IBV_QPS_RTR) {
		ack.status = IBV_WC_RETRY_EXC_ERR; /* nobody answers for a QP that is not there */
	} else if (m->op == W_SEND) {
		for (int i = 0; i < 1000 && q && q->rcount == 0; i++) {
			UNLOCK();
			usleep(1000);
			LOCK();
			q = find_qp(m->dst_qpn);
		}
		if (!q || q->rcount == 0) {
			ack.status = IBV_WC_RNR_RETRY_EXC_ERR;
		} else {
			int h = q->rhead;
			struct ibv_wc rwc = {.wr_id = q->rid[h], .opcode = IBV_WC_RECV, .byte_len = m->len,
					     .qp_num = q->qp.qp_num, .src_qp = m->src_qpn};
			if (m->len > q->rlen[h]) {
				rwc.status = IBV_WC_LOC_LEN_ERR;
				ack.status = IBV_WC_REM_INV_REQ_ERR;
			} else {
				memcpy((void *)(uintptr_t)q->raddr[h], data, m->len);
			}
			q->rhead = (h + 1) % MAX_RECV;
			q->rcount--;
			push(q->qp.recv_cq, &rwc);
		}
	} else if (is("peer-badrkey") || !rkey_mr(m->rkey, m->raddr, m->len)) {
		ack.status = IBV_WC_REM_ACCESS_ERR;
	} else if (m->op == W_WRITE) {
		memcpy((void *)(uintptr_t)m->raddr, data, m->len);
	} else {
		ack.op = W_READ_RESP;
		payload = (void *)(uintptr_t)m->raddr;
	}
	if (m->noack && ack.status == IBV_WC_SUCCESS)
		return;
	wire_send(m->src_qpn, &ack, ack.status == IBV_WC_SUCCESS ? payload : NULL, payload ? m->len : 0);
}

/* wire_complete is the requester's side of an ACK or a READ response. */
static void wire_complete(struct wmsg *m, char *data)
{
	struct fqp *q = find_qp(m->dst_qpn);
	if (!q)
		return;
	if (m->op == W_READ_RESP && m->status == IBV_WC_SUCCESS)
		memcpy((void *)(uintptr_t)m->laddr, data, m->len);
	struct ibv_wc wc = {.wr_id = m->wr_id, .status = m->status, .opcode = m->wc_opcode, .qp_num = q->qp.qp_num,
			    .byte_len = m->wc_opcode == IBV_WC_RDMA_READ ? m->len : 0};
	if (m->signaled || m->status != IBV_WC_SUCCESS)
		push(q->qp.send_cq, &wc);
	if (m->status != IBV_WC_SUCCESS)
		q->qp.state = IBV_QPS_ERR;
}

static void *wire_loop(void *arg)
{
	(void)arg;
	static char buf[sizeof(struct wmsg) + WIRE_MAX];
	for (;;) {
		ssize_t n = recv(wire_fd, buf, sizeof buf, 0);
		if (n < (ssize_t)sizeof(struct wmsg)) {
			if (n < 0 && errno != EINTR)
				return NULL;
			continue;
		}
		static long seen;
		const char *drop = getenv("FAKE_IBV_DROP_AFTER");
		if (is("peer-silent") || (drop && ++seen > atol(drop)))
			continue;
		struct wmsg *m = (struct wmsg *)buf;
		const char *larger = getenv("FAKE_IBV_DROP_LARGER");
		if (larger && m->len > (uint32_t)atol(larger))
			continue;
		LOCK();
		if (m->op == W_ACK || m->op == W_READ_RESP)
			wire_complete(m, buf + sizeof *m);
		else
			wire_respond(m, buf + sizeof *m);
		UNLOCK();
	}
}

/* wire_start binds this process's socket and starts its responder. */
static int wire_start(uint32_t qpn)
{
	if (wire_fd >= 0)
		return 0;
	struct sockaddr_un a;
	socklen_t l = wire_name(&a, qpn);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, l))
		return -1;
	int sz = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
	wire_fd = fd;
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	return pthread_create(&t, &at, wire_loop, NULL) ? -1 : 0;
}

/* wire_post sends one RC work request to a QP of another process; its
 * completion comes with the ACK. */
static void wire_post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct fqp *f = (struct fqp *)qp;
	uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
	uint64_t addr = wr->num_sge ? wr->sg_list[0].addr : 0;
	struct wmsg m = {.dst_qpn = f->dest, .src_qpn = qp->qp_num, .wr_id = wr->wr_id, .len = len,
			 .signaled = !!(wr->send_flags & IBV_SEND_SIGNALED), .raddr = wr->wr.rdma.remote_addr,
			 .rkey = wr->wr.rdma.rkey, .laddr = addr};
	struct ibv_wc wc = {.wr_id = wr->wr_id, .qp_num = qp->qp_num};
	switch (wr->opcode) {
	case IBV_WR_SEND:
		m.op = W_SEND;
		m.wc_opcode = wc.opcode = IBV_WC_SEND;
		break;
	case IBV_WR_RDMA_WRITE:
		m.op = W_WRITE;
		m.wc_opcode = wc.opcode = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_RDMA_READ:
		m.op = W_READ_REQ;
		m.wc_opcode = wc.opcode = IBV_WC_RDMA_READ;
		break;
	default:
		wc.status = IBV_WC_LOC_QP_OP_ERR;
	}
	if (wr->num_sge > 1 || (wr->num_sge == 1 && !key_ok(wr->sg_list[0].lkey, addr, len)))
		wc.status = IBV_WC_LOC_PROT_ERR;
	else if (len > WIRE_MAX && m.op != W_WRITE)
		wc.status = IBV_WC_LOC_LEN_ERR; /* the fake's limit */
	if (wc.status != IBV_WC_SUCCESS) {
		push(qp->send_cq, &wc);
		return;
	}
	/* A long WRITE goes as chunks; only the last asks for the ACK. */
	while (m.op == W_WRITE && m.len > WIRE_MAX) {
		struct wmsg c = m;
		c.len = WIRE_MAX;
		c.noack = 1;
		if (wire_send(f->dest, &c, (void *)(uintptr_t)addr, WIRE_MAX))
			break;
		addr += WIRE_MAX;
		m.raddr += WIRE_MAX;
		m.len -= WIRE_MAX;
	}
	if (wire_send(f->dest, &m, m.op == W_READ_REQ ? NULL : (void *)(uintptr_t)addr, m.op == W_READ_REQ ? 0 : m.len)) {
		wc.status = IBV_WC_RETRY_EXC_ERR; /* the peer's process is gone */
		push(qp->send_cq, &wc);
		qp->state = IBV_QPS_ERR;
	}
}

static int fake_post_send_unlocked(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *f = (struct fqp *)qp;
	for (; wr; wr = wr->next) {
		if (qp->state != IBV_QPS_RTS) {
			*bad = wr;
			return EINVAL;
		}
		if (qp->qp_type == IBV_QPT_UD) {
			if (wr->num_sge != 1 || !key_ok(wr->sg_list[0].lkey, wr->sg_list[0].addr, wr->sg_list[0].length)) {
				*bad = wr;
				return EINVAL;
			}
			ud_deliver(qp, wr, wr->sg_list[0].length);
			struct ibv_wc wc = {.wr_id = wr->wr_id, .opcode = IBV_WC_SEND, .qp_num = qp->qp_num};
			if (wr->send_flags & IBV_SEND_SIGNALED)
				push(qp->send_cq, &wc);
			continue;
		}
		if (is("silent") || f->broken)
			continue;
		if (peer_mode() && !find_qp(f->dest)) {
			wire_post(qp, wr);
			continue;
		}
		struct ibv_wc wc = {.wr_id = wr->wr_id, .opcode = IBV_WC_SEND, .qp_num = qp->qp_num};
		uint32_t len = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			if (!key_ok(wr->sg_list[i].lkey, wr->sg_list[i].addr, wr->sg_list[i].length))
				wc.status = IBV_WC_LOC_PROT_ERR;
			len += wr->sg_list[i].length;
		}
		if (is("send-err"))
			wc.status = IBV_WC_RETRY_EXC_ERR;
		struct fqp *peer = find_qp(f->dest);
		if (wc.status == IBV_WC_SUCCESS) {
			if (!peer || peer->rcount == 0) {
				wc.status = IBV_WC_RNR_RETRY_EXC_ERR;
			} else {
				int h = peer->rhead;
				struct ibv_wc rwc = {.wr_id = peer->rid[h], .opcode = IBV_WC_RECV, .byte_len = len,
						     .qp_num = peer->qp.qp_num, .src_qp = qp->qp_num};
				char *dst = host_of(peer->rkey_[h], peer->raddr[h], peer->rlen[h]);
				if (len > peer->rlen[h]) {
					rwc.status = IBV_WC_LOC_LEN_ERR;
				} else if (!dst) {
					rwc.status = IBV_WC_LOC_PROT_ERR;
				} else if (wr->num_sge == 1) {
					memcpy(dst, host_of(wr->sg_list[0].lkey, wr->sg_list[0].addr, len), len);
				}
				peer->rhead = (h + 1) % MAX_RECV;
				peer->rcount--;
				push(peer->qp.recv_cq, &rwc);
			}
		}
		if ((wr->send_flags & IBV_SEND_SIGNALED) || wc.status != IBV_WC_SUCCESS) {
			if (push(qp->send_cq, &wc) && is("cq-err-partial"))
				f->broken = 1;
		}
	}
	return 0;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	LOCK();
	int r = fake_post_send_unlocked(qp, wr, bad);
	UNLOCK();
	return r;
}

static int fake_post_recv_unlocked(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fqp *f = (struct fqp *)qp;
	for (; wr; wr = wr->next) {
		if (f->rcount >= MAX_RECV || wr->num_sge != 1) {
			*bad = wr;
			return ENOMEM;
		}
		int t = (f->rhead + f->rcount) % MAX_RECV;
		f->rid[t] = wr->wr_id;
		f->raddr[t] = wr->sg_list[0].addr;
		f->rlen[t] = wr->sg_list[0].length;
		f->rkey_[t] = wr->sg_list[0].lkey;
		f->rcount++;
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	LOCK();
	int r = fake_post_recv_unlocked(qp, wr, bad);
	UNLOCK();
	return r;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	if (!strcmp(mode(), "hang-open"))
		for (;;)
			pause();
	if (!loop_mode()) {
		errno = !strcmp(mode(), "eacces-open") ? EACCES : ENOSYS;
		return NULL;
	}
	struct fctx *f = calloc(1, sizeof *f);
	int p[2];
	if (!f || pipe2(p, O_CLOEXEC)) {
		errno = ENOMEM;
		return NULL;
	}
	f->ctx.device = d;
	f->ctx.cmd_fd = -1;
	f->ctx.async_fd = p[0];
	f->event_wfd = p[1];
	f->ctx.num_comp_vectors = 1;
	pthread_mutex_init(&f->ctx.mutex, NULL);
	f->ctx.ops.poll_cq = fake_poll_cq;
	f->ctx.ops.req_notify_cq = fake_req_notify_cq;
	f->ctx.ops.post_send = fake_post_send;
	f->ctx.ops.post_recv = fake_post_recv;
	return &f->ctx;
}

int ibv_close_device(struct ibv_context *c)
{
	struct fctx *f = (struct fctx *)c;
	close(c->async_fd);
	close(f->event_wfd);
	free(f);
	return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	(void)c;
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "1.2.3");
	a->node_guid = htobe64(0x0002c90300a1b2c3ULL);
	a->vendor_id = 0x15b3;
	a->vendor_part_id = 0x1017;
	a->max_qp = 1024;
	a->max_qp_wr = 16384;
	a->max_sge = 4;
	a->max_cq = 1024;
	a->max_cqe = 65536;
	a->max_mr = 1024;
	a->max_mr_size = 1ULL << 40;
	a->max_pd = 1024;
	a->phys_port_cnt = 1;
	return 0;
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat)
{
	(void)c;
	/* The caller passes the modern struct, which begins like the old one. */
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof *a);
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 16;
	a->lid = 1;
	a->sm_lid = 1;
	a->link_layer = IBV_LINK_LAYER_INFINIBAND;
	a->qkey_viol_cntr = qkey_violations;
	if (roce_mode()) {
		a->lid = a->sm_lid = 0;
		a->link_layer = IBV_LINK_LAYER_ETHERNET;
	} else if (is("efa")) {
		a->lid = a->sm_lid = 0;
		a->link_layer = IBV_LINK_LAYER_UNSPECIFIED;
	}
	return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
{
	(void)c; (void)p;
	memset(g, 0, sizeof *g);
	if ((roce_mode() || is("efa")) && i == 0) {
		static const uint8_t v4mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
		memcpy(g->raw, v4mapped, 16);
		const char *v4 = getenv("FAKE_IBV_GID4");
		if (v4 && inet_pton(AF_INET, v4, g->raw + 12) != 1)
			memcpy(g->raw, v4mapped, 16);
		if (is("efa"))
			g->raw[0] = 0xfe;
	}
	return 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (roce_mode() && !attr->is_global) {
		errno = EINVAL; /* RoCE needs a GRH */
		return NULL;
	}
	if (!roce_mode() && !is("efa") && !attr->is_global && attr->dlid != 1) {
		errno = EINVAL;
		return NULL;
	}
	struct fah *a = calloc(1, sizeof *a);
	a->ah.context = pd->context;
	a->ah.pd = pd;
	a->is_global = attr->is_global;
	((struct fpd *)pd)->users++;
	return &a->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	((struct fpd *)ah->pd)->users--;
	free(ah);
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct fpd *p = calloc(1, sizeof *p);
	p->pd.context = c;
	return &p->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct fpd *p = (struct fpd *)pd;
	if (p->users)
		return EBUSY;
	free(p);
	return 0;
}

/* new_mr records an MR over [base, base+len) at host. */
static struct ibv_mr *new_mr(struct ibv_pd *pd, void *addr, uint64_t base, char *host, size_t len, size_t maplen)
{
	for (int i = 0; i < MAX_MRS; i++) {
		if (!mrs[i]) {
			struct ibv_mr *m = calloc(1, sizeof *m);
			m->context = pd->context;
			m->pd = pd;
			m->addr = addr;
			m->length = len;
			m->lkey = m->rkey = next_key++;
			mrs[i] = m;
			mr_base[i] = base;
			mr_host[i] = host;
			mr_maplen[i] = maplen;
			((struct fpd *)pd)->users++;
			return m;
		}
	}
	errno = ENOMEM;
	return NULL;
}

/* device_memory asks the fake libcuda, when it is loaded, whether the
 * range is its "device memory". */
static int device_memory(const void *addr, size_t len)
{
	int (*owns)(const void *, size_t) = (int (*)(const void *, size_t))dlsym(RTLD_DEFAULT, "fake_gpu_owns");
	return owns && owns(addr, len);
}

static struct ibv_mr *ibv_reg_mr_unlocked(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	(void)access;
	if (device_memory(addr, len)) {
		const char *pm = getenv("FAKE_PEERMEM");
		if (!pm || strcmp(pm, "1")) {
			errno = EFAULT;
			return NULL;
		}
	}
	return new_mr(pd, addr, (uint64_t)(uintptr_t)addr, addr, len, 0);
}

#ifndef NO_REG_DMABUF
static struct ibv_mr *ibv_reg_dmabuf_mr_unlocked(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	(void)access;
	const char *d = getenv("FAKE_IBV_DMABUF");
	if (d && !strcmp(d, "eopnotsupp")) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* The fake libcuda's descriptor maps its whole allocation. */
	long (*range_off)(int) = (long (*)(int))dlsym(RTLD_DEFAULT, "fake_gpu_dmabuf_offset");
	if (range_off)
		offset += (uint64_t)range_off(fd);
	struct stat st;
	if (fstat(fd, &st)) {
		errno = EBADF;
		return NULL;
	}
	if (length == 0 || offset + length > (uint64_t)st.st_size || offset % (uint64_t)sysconf(_SC_PAGESIZE)) {
		errno = EINVAL;
		return NULL;
	}
	char *host = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
	if (host == MAP_FAILED) {
		errno = EINVAL;
		return NULL;
	}
	/* As libibverbs does: the struct's addr is the fd offset. */
	struct ibv_mr *m = new_mr(pd, (void *)(uintptr_t)(offset - (range_off ? (uint64_t)range_off(fd) : 0)), iova, host, length, length);
	if (!m)
		munmap(host, length);
	return m;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	LOCK();
	struct ibv_mr *r = ibv_reg_dmabuf_mr_unlocked(pd, offset, length, iova, fd, access);
	UNLOCK();
	return r;
}
#endif

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	LOCK();
	struct ibv_mr *r = ibv_reg_mr_unlocked(pd, addr, len, access);
	UNLOCK();
	return r;
}

static int ibv_dereg_mr_unlocked(struct ibv_mr *m)
{
	for (int i = 0; i < MAX_MRS; i++)
		if (mrs[i] == m) {
			if (mr_maplen[i])
				munmap(mr_host[i], mr_maplen[i]);
			mrs[i] = NULL;
		}
	((struct fpd *)m->pd)->users--;
	free(m);
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *m)
{
	LOCK();
	int r = ibv_dereg_mr_unlocked(m);
	UNLOCK();
	return r;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *x, struct ibv_comp_channel *ch, int v)
{
	(void)x; (void)v;
	struct fcq *f = calloc(1, sizeof *f);
	if (is("cq-page") && cqe < 4096)
		cqe = 4096;
	f->cq.context = c;
	f->cq.channel = ch;
	f->cq.cqe = cqe;
	f->ring = calloc(cqe, sizeof *f->ring);
	return &f->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct fcq *f = (struct fcq *)cq;
	if (f->users)
		return EBUSY;
	free(f->ring);
	free(f);
	return 0;
}

static struct ibv_qp *ibv_create_qp_unlocked(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	if ((is("efa") && a->qp_type == IBV_QPT_RC) || (is("ud-refused") && a->qp_type == IBV_QPT_UD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	for (int i = 0; i < MAX_QPS; i++) {
		if (!qps[i]) {
			struct fqp *f = calloc(1, sizeof *f);
			f->qp.context = pd->context;
			f->qp.pd = pd;
			f->qp.send_cq = a->send_cq;
			f->qp.recv_cq = a->recv_cq;
			f->qp.qp_num = next_qpn++;
			if (peer_mode()) {
				/* Unique across processes: the high bits name this one. */
				f->qp.qp_num = ((uint32_t)(getpid() & 0xffff) << 8) | (f->qp.qp_num & 0xff);
				if (wire_start(f->qp.qp_num)) {
					free(f);
					errno = EADDRINUSE;
					return NULL;
				}
			}
			f->qp.state = IBV_QPS_RESET;
			f->qp.qp_type = a->qp_type;
			((struct fcq *)a->send_cq)->users++;
			((struct fcq *)a->recv_cq)->users++;
			((struct fpd *)pd)->users++;
			qps[i] = f;
			return &f->qp;
		}
	}
	errno = ENOMEM;
	return NULL;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	LOCK();
	struct ibv_qp *r = ibv_create_qp_unlocked(pd, a);
	UNLOCK();
	return r;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fqp *f = (struct fqp *)qp;
	if (!(mask & IBV_QP_STATE))
		return 0;
	enum ibv_qp_state from = qp->state, to = a->qp_state;
	int ok = to == IBV_QPS_RESET || to == IBV_QPS_ERR || (from == IBV_QPS_RESET && to == IBV_QPS_INIT) ||
		 (from == IBV_QPS_INIT && (to == IBV_QPS_INIT || to == IBV_QPS_RTR)) ||
		 (from == IBV_QPS_RTR && to == IBV_QPS_RTS) || (from == IBV_QPS_RTS && to == IBV_QPS_RTS);
	if (is("iwarp") && (to == IBV_QPS_RTR || to == IBV_QPS_RTS))
		ok = 0;
	if (!ok)
		return EINVAL;
	if (to == IBV_QPS_RTR && (mask & IBV_QP_DEST_QPN))
		f->dest = a->dest_qp_num;
	if (to == IBV_QPS_INIT && (mask & IBV_QP_QKEY))
		f->qkey = a->qkey;
	if (qp->qp_type == IBV_QPT_UD && to == IBV_QPS_INIT && from == IBV_QPS_RESET && !(mask & IBV_QP_QKEY))
		return EINVAL; /* UD needs its Q_Key at INIT */
	if (to == IBV_QPS_RESET)
		f->rhead = f->rcount = 0;
	qp->state = to;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	(void)mask;
	memset(a, 0, sizeof *a);
	memset(init, 0, sizeof *init);
	a->qp_state = qp->state;
	a->qkey = ((struct fqp *)qp)->qkey;
	return 0;
}

static int ibv_destroy_qp_unlocked(struct ibv_qp *qp)
{
	for (int i = 0; i < MAX_QPS; i++)
		if (qps[i] == (struct fqp *)qp)
			qps[i] = NULL;
	((struct fcq *)qp->send_cq)->users--;
	((struct fcq *)qp->recv_cq)->users--;
	((struct fpd *)qp->pd)->users--;
	free(qp);
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	LOCK();
	int r = ibv_destroy_qp_unlocked(qp);
	UNLOCK();
	return r;
}

int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *e)
{
	struct event_rec r;
	ssize_t n = read(c->async_fd, &r, sizeof r);
	if (n != sizeof r) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	e->event_type = r.type;
	e->element.cq = r.element;
	return 0;
}

void ibv_ack_async_event(struct ibv_async_event *e) { (void)e; }

#define FAIL_INT(name, ...) int name(__VA_ARGS__) { return ENOSYS; }
#define FAIL_PTR(type, name, ...) type name(__VA_ARGS__) { errno = ENOSYS; return NULL; }

FAIL_PTR(struct ibv_comp_channel *, ibv_create_comp_channel, struct ibv_context *c)
FAIL_INT(ibv_destroy_comp_channel, struct ibv_comp_channel *c)
FAIL_INT(ibv_get_cq_event, struct ibv_comp_channel *c, struct ibv_cq **q, void **x)
void ibv_ack_cq_events(struct ibv_cq *c, unsigned int n) { (void)c; (void)n; }
