/* SPDX-License-Identifier: MIT */
/* The malicious-frontend harness: see hostile.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"

const char *vioscope;

int hostile_init(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH-TO-VIOSCOPE\n", argv[0]);
		return 2;
	}
	vioscope = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void nap_ms(int ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

/* ---- the target process ------------------------------------------------------------------ */
int proc_start(struct proc *p, const char *const *args)
{
	char *argv[64], expanded[32][256];
	unsigned n = 0, e = 0;
	uint64_t deadline;
	struct stat st;
	int fd;

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->pidfd = -1;
	strcpy(p->dir, "/tmp/vs-hostile-XXXXXX");
	if (!mkdtemp(p->dir))
		return -errno;
	snprintf(p->sock, sizeof(p->sock), "%s/sock", p->dir);
	snprintf(p->log, sizeof(p->log), "%s/stderr", p->dir);
	snprintf(p->file, sizeof(p->file), "%s/disk.img", p->dir);
	snprintf(p->rpc, sizeof(p->rpc), "%s/rpc", p->dir);
	fd = open(p->file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 64 << 20) < 0)
		return -errno;
	close(fd);

	argv[n++] = (char *)vioscope;
	argv[n++] = "target";
	argv[n++] = "--socket";
	argv[n++] = p->sock;
	for (; args && *args && n < 62 && e < 32; args++) {
		const char *f = strstr(*args, "%F"), *r = strstr(*args, "%R"),
			   *d = strstr(*args, "%D");
		if (f || r || d) {
			const char *at = f ? f : r ? r : d;

			snprintf(expanded[e], sizeof(expanded[e]), "%.*s%s%s", (int)(at - *args),
				 *args, f ? p->file : r ? p->rpc : p->dir, at + 2);
			argv[n++] = expanded[e++];
		} else {
			argv[n++] = (char *)*args;
		}
	}
	argv[n] = NULL;

	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		int log = open(p->log, O_CREAT | O_WRONLY | O_APPEND, 0600);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		execv(vioscope, argv);
		_exit(127);
	}
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (p->pidfd < 0)
		return -errno;
	/* Readiness: the socket appears once the target listens. */
	for (deadline = now_ms() + FE_WAIT_MS; now_ms() < deadline; nap_ms(10)) {
		if (!proc_alive(p))
			break;
		if (stat(p->sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
	}
	proc_log_dump(p);
	return -ETIMEDOUT;
}

int proc_rpc(struct proc *p, const char *request, char *reply, size_t len, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t deadline = now_ms() + timeout_ms;
	size_t got = 0;
	int fd, rc = 0;

	if (len < 2 || strlen(p->rpc) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, p->rpc);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request) ||
	    send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		rc = -errno;
		goto out;
	}
	while (!memchr(reply, '\n', got)) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		ssize_t n;

		if (left <= 0 || poll(&pf, 1, left) != 1) {
			rc = -ETIMEDOUT;
			goto out;
		}
		n = recv(fd, reply + got, len - 1 - got, 0);
		if (n <= 0) {
			rc = n ? -errno : -ECONNRESET;
			goto out;
		}
		got += (size_t)n;
		if (got == len - 1 && !memchr(reply, '\n', got)) {
			rc = -EMSGSIZE;
			goto out;
		}
	}
	*(char *)memchr(reply, '\n', got) = 0;
out:
	close(fd);
	if (rc)
		reply[0] = 0;
	return rc;
}

bool proc_alive(struct proc *p)
{
	struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};

	return p->pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

int proc_stop(struct proc *p, int signo, int timeout_ms, int *sig)
{
	struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
	int st = 0, rc = -1;

	if (sig)
		*sig = 0;
	if (p->pid <= 0)
		return -1;
	if (signo)
		kill(p->pid, signo);
	if (poll(&pf, 1, timeout_ms) != 1) {
		fprintf(stderr, "target pid %d did not exit within %d ms: killed\n", p->pid,
			timeout_ms);
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &st, 0);
		rc = -1;
	} else if (waitpid(p->pid, &st, 0) == p->pid) {
		if (WIFEXITED(st))
			rc = WEXITSTATUS(st);
		else if (WIFSIGNALED(st) && sig)
			*sig = WTERMSIG(st);
	}
	close(p->pidfd);
	p->pidfd = -1;
	p->pid = -1;
	return rc;
}

static char *log_read(struct proc *p)
{
	int fd = open(p->log, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	if (fd < 0)
		return NULL;
	for (;;) {
		if (cap - len < 4097) {
			char *nb = realloc(buf, cap += 65536);
			if (!nb)
				break;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (buf)
		buf[len] = 0;
	return buf;
}

bool proc_log_wait(struct proc *p, const char *needle, int timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		char *log = log_read(p);
		bool found = log && strstr(log, needle);

		free(log);
		if (found)
			return true;
		if (now_ms() >= deadline)
			return false;
		nap_ms(10);
	}
}

void proc_log_dump(struct proc *p)
{
	char *log = log_read(p);

	fprintf(stderr, "---- target stderr ----\n%s---- end ----\n", log ? log : "(none)\n");
	free(log);
}

int proc_fd_count(struct proc *p)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", p->pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

void proc_cleanup(struct proc *p)
{
	DIR *d = opendir(p->dir);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			unlinkat(dirfd(d), de->d_name, 0);
	if (d)
		closedir(d);
	rmdir(p->dir);
}

/* ---- the management socket and the test gate ------------------------------------------------ */
static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int rpc_open(const char *path)
{
	uint64_t deadline = now_ms() + FE_WAIT_MS;
	int fd;

	while ((fd = unix_connect(path)) < 0 && now_ms() < deadline)
		nap_ms(10); /* it listens just after the vhost-user socket */
	return fd;
}

/* ---- guest memory ------------------------------------------------------------------------ */
int gmem_init(struct gmem *g)
{
	g->fd = memfd_create("hostile-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (g->fd < 0 || ftruncate(g->fd, (off_t)FE_MEM) < 0)
		return -errno;
	g->mem = mmap(NULL, FE_MEM, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
	return g->mem == MAP_FAILED ? -errno : 0;
}

void gmem_fini(struct gmem *g)
{
	if (g->mem && g->mem != MAP_FAILED)
		munmap(g->mem, FE_MEM);
	if (g->fd >= 0)
		close(g->fd);
	g->mem = NULL;
	g->fd = -1;
}

void gmem_regions(struct gmem *g, struct vs_vhost_mem_region r[2])
{
	r[0] = (struct vs_vhost_mem_region){.guest_phys_addr = 0,
					    .memory_size = FE_GAP_START,
					    .userspace_addr = (uint64_t)(uintptr_t)g->mem,
					    .mmap_offset = 0};
	r[1] = (struct vs_vhost_mem_region){.guest_phys_addr = FE_GAP_END,
					    .memory_size = FE_MEM - FE_GAP_END,
					    .userspace_addr = (uint64_t)(uintptr_t)(g->mem + FE_GAP_END),
					    .mmap_offset = FE_GAP_END};
}

/* ---- the frontend ------------------------------------------------------------------------ */
int fe_connect(struct fe *fe, const char *sock, struct gmem *g)
{
	struct timeval tv = {.tv_sec = FE_WAIT_MS / 1000};
	int rc;

	memset(fe, 0, sizeof(*fe));
	fe->g = g;
	for (unsigned q = 0; q < FE_MAXQ; q++)
		fe->kick[q] = fe->call[q] = -1;
	if ((rc = vs_vhost_drv_connect(&fe->drv, sock)))
		return rc;
	/* Every reply wait has a deadline. */
	setsockopt(fe->drv.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fe->drv.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

static uint64_t uva(struct fe *fe, const void *host)
{
	(void)fe;
	return (uint64_t)(uintptr_t)host;
}

static int ring_setup(struct fe *fe, unsigned q, unsigned size)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	bool event_idx = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX);
	bool indirect = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	int rc;

	if (vs_vq_drv_ring_bytes(size) > 0x100000)
		return -EINVAL;
	if ((rc = vs_vq_drv_init(vq, size, gmem_host(fe->g, FE_RING(q)), event_idx, indirect)))
		return rc;
	vq->qid = q;
	fe->qsize[q] = size;
	fe->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fe->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fe->kick[q] < 0 || fe->call[q] < 0)
		return -errno;
	if ((rc = vs_vhost_drv_set_vring_num(&fe->drv, q, size)) ||
	    (rc = vs_vhost_drv_set_vring_base(&fe->drv, q, 0)) ||
	    (rc = vs_vhost_drv_set_vring_addr(&fe->drv, q, uva(fe, vq->desc), uva(fe, vq->avail),
						uva(fe, vq->used))) ||
	    (rc = vs_vhost_drv_set_vring_call(&fe->drv, q, fe->call[q])) ||
	    (rc = vs_vhost_drv_set_vring_kick(&fe->drv, q, fe->kick[q])))
		return rc;
	fe->nq = q + 1;
	return 0;
}

int fe_setup(struct fe *fe, const struct fe_opts *o)
{
	uint64_t want = VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) |
			(1ull << VS_VHOST_F_PROTOCOL_FEATURES);
	struct vs_vhost_mem_region r[2];
	int fds[2] = {fe->g->fd, fe->g->fd};
	uint64_t offered, proto, nq;
	int rc;

	if (!o->no_indirect)
		want |= VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	gmem_regions(fe->g, r);
	if ((rc = vs_vhost_drv_get_features(&fe->drv, &offered)) ||
	    (rc = vs_vhost_drv_get_protocol_features(&fe->drv, &proto)) ||
	    (rc = vs_vhost_drv_set_protocol_features(
		 &fe->drv, proto & ((1ull << VS_VHOST_PROTOCOL_F_MQ) |
				    (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK)))) ||
	    (rc = vs_vhost_drv_get_queue_num(&fe->drv, &nq)))
		return rc;
	if (nq < o->nq || o->nq > FE_MAXQ)
		return -ENOTSUP;
	fe->features = offered & want;
	if ((rc = vs_vhost_drv_set_owner(&fe->drv)) ||
	    (rc = vs_vhost_drv_set_features(&fe->drv, fe->features)) ||
	    (rc = vs_vhost_drv_set_mem_table(&fe->drv, r, 2, fds)))
		return rc;
	if (o->no_rings)
		return 0;
	for (unsigned q = 0; q < o->nq; q++)
		if ((rc = ring_setup(fe, q, o->qsize[q] ? o->qsize[q] : 128)))
			return rc;
	for (unsigned q = 0; q < o->nq; q++)
		if ((rc = vs_vhost_drv_set_vring_enable(&fe->drv, q, true)))
			return rc;
	return 0;
}

int fe_open(struct fe *fe, const char *sock, struct gmem *g, const struct fe_opts *o)
{
	int rc = fe_connect(fe, sock, g);

	return rc ? rc : fe_setup(fe, o);
}

void fe_close(struct fe *fe)
{
	if (fe->drv.sock >= 0)
		vs_vhost_drv_close(&fe->drv);
	fe->drv.sock = -1;
	for (unsigned q = 0; q < FE_MAXQ; q++) {
		if (q < fe->nq)
			vs_vq_drv_destroy(&fe->vq[q]);
		if (fe->kick[q] >= 0)
			close(fe->kick[q]);
		if (fe->call[q] >= 0)
			close(fe->call[q]);
		fe->kick[q] = fe->call[q] = -1;
	}
	fe->nq = 0;
}

int fe_send(struct fe *fe, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
	    const int *fds, unsigned nfds)
{
	uint8_t buf[VS_VHOST_HDR_SIZE + 512];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = VS_VHOST_HDR_SIZE + size};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	uint32_t fl = VS_VHOST_VERSION | flags;

	if (size > 512 || nfds > 16)
		return -EINVAL;
	memcpy(buf, &request, 4);
	memcpy(buf + 4, &fl, 4);
	memcpy(buf + 8, &size, 4);
	if (size)
		memcpy(buf + VS_VHOST_HDR_SIZE, payload, size);
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(fe->drv.sock, &mh, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -errno;
}

int fe_reply(struct fe *fe, struct vs_vhost_msg *reply)
{
	char why[VS_VHOST_WHY_LEN];

	return vs_vhost_msg_recv_reply(fe->drv.sock, reply, why, sizeof(why));
}

int64_t fe_ask(struct fe *fe, uint32_t request, const void *payload, uint32_t size, const int *fds,
	       unsigned nfds)
{
	struct vs_vhost_msg reply;
	int rc = fe_send(fe, request, VS_VHOST_FLAG_NEED_REPLY, payload, size, fds, nfds);

	if (rc || (rc = fe_reply(fe, &reply)))
		return rc;
	if (reply.request != request || reply.size != 8)
		return -EPROTO;
	return (int64_t)reply.payload.u64;
}

bool fe_dropped(struct fe *fe, int timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	uint8_t buf[4096];

	for (;;) {
		int left = ms_left(deadline);
		struct pollfd pf = {.fd = fe->drv.sock, .events = POLLIN};

		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return false;
		ssize_t n = recv(fe->drv.sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		/* a reply still on its way: skip it */
	}
}

/* ---- the guest ----------------------------------------------------------------------------- */
#define SLOT_HDR   0x0
#define SLOT_RESP  0x100
#define SLOT_TABLE 0x200
#define SLOT_DATA  0x1000

int fe_post(struct fe *fe, unsigned q, unsigned s, const struct fe_cmd *c, uint16_t *head)
{
	const uint64_t base = FE_SLOT(s);
	struct vs_virtio_scsi_cmd_req req;
	struct vs_vq_buf bufs[4];
	struct vs_vq_drv *vq = &fe->vq[q];
	uint64_t one = 1;
	unsigned n = 0;
	int rc;

	if (s >= FE_SLOTS || (!c->in_gpa && c->in_len > 0x1000) ||
	    (!c->out_gpa && c->out_len > 0x1000))
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	if ((rc = vs_vscsi_lun_encode(req.lun, 0, c->lun)))
		return rc;
	req.tag = vs_le64(c->tag);
	memcpy(req.cdb, c->cdb, sizeof(req.cdb));
	memcpy(gmem_host(fe->g, base + SLOT_HDR), &req, sizeof(req));
	memset(gmem_host(fe->g, base + SLOT_RESP), 0xee, sizeof(struct vs_virtio_scsi_cmd_resp));
	bufs[n++] = (struct vs_vq_buf){base + SLOT_HDR, sizeof(req), false};
	if (c->out_len) {
		uint64_t at = c->out_gpa ? c->out_gpa : base + SLOT_DATA;
		if (!c->out_gpa && c->out)
			memcpy(gmem_host(fe->g, at), c->out, c->out_len);
		bufs[n++] = (struct vs_vq_buf){at, c->out_len, false};
	}
	bufs[n++] = (struct vs_vq_buf){base + SLOT_RESP, sizeof(struct vs_virtio_scsi_cmd_resp), true};
	if (c->in_len)
		bufs[n++] =
		    (struct vs_vq_buf){c->in_gpa ? c->in_gpa : base + SLOT_DATA, c->in_len, true};
	if (fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC))
		rc = vs_vq_drv_add_indirect(vq, bufs, n, gmem_host(fe->g, base + SLOT_TABLE),
					    base + SLOT_TABLE, head);
	else
		rc = vs_vq_drv_add(vq, bufs, n, head);
	if (rc)
		return rc;
	if (!fe->no_kick && vs_vq_drv_should_kick(vq) &&
	    write(fe->kick[q], &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len, int timeout_ms)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	uint64_t deadline = now_ms() + timeout_ms;
	int rc;

	for (;;) {
		struct pollfd p = {.fd = fe->call[q], .events = POLLIN};
		int left = ms_left(deadline);
		uint64_t v;

		rc = vs_vq_drv_get_used(vq, head, len);
		if (rc != -EAGAIN)
			return rc;
		vs_vq_drv_enable_cb(vq, true);
		if (vs_vq_drv_has_used(vq))
			continue;
		if (left <= 0)
			return -ETIMEDOUT;
		if (p.fd < 0) {
			nap_ms(left < 5 ? left : 5); /* no call fd: poll the ring */
			continue;
		}
		rc = poll(&p, 1, left);
		if (rc == 0)
			return -ETIMEDOUT; /* nothing completed, or no interrupt came */
		if (rc < 0)
			return -errno;
		if (read(fe->call[q], &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
}

void fe_result(struct fe *fe, unsigned s, struct fe_cmd *c)
{
	memcpy(&c->resp, gmem_host(fe->g, FE_SLOT(s) + SLOT_RESP), sizeof(c->resp));
}

void *fe_slot_in(struct fe *fe, unsigned s)
{
	return gmem_host(fe->g, FE_SLOT(s) + SLOT_DATA);
}

int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c)
{
	uint16_t head, h;
	int rc;

	if ((rc = fe_post(fe, q, 0, c, &head)) ||
	    (rc = fe_wait_used(fe, q, &h, &c->used_len, FE_WAIT_MS)))
		return rc;
	if (h != head)
		return -EPROTO;
	fe_result(fe, 0, c);
	return 0;
}

int fe_tmf(struct fe *fe, uint32_t subtype, unsigned lun, uint64_t tag, uint8_t *response)
{
	const uint64_t base = FE_SLOT(FE_SLOTS - 1);
	struct vs_virtio_scsi_ctrl_tmf_req req = {.type = vs_le32(VS_VIRTIO_SCSI_T_TMF),
						  .subtype = vs_le32(subtype),
						  .tag = vs_le64(tag)};
	struct vs_vq_buf bufs[2] = {{base, sizeof(req), false},
				    {base + SLOT_RESP, sizeof(struct vs_virtio_scsi_ctrl_tmf_resp), true}};
	struct vs_vq_drv *vq = &fe->vq[VS_VIRTIO_SCSI_VQ_CTRL];
	uint16_t head, h;
	uint32_t len;
	uint64_t one = 1;
	int rc;

	if ((rc = vs_vscsi_lun_encode(req.lun, 0, lun)))
		return rc;
	memcpy(gmem_host(fe->g, base), &req, sizeof(req));
	*(uint8_t *)gmem_host(fe->g, base + SLOT_RESP) = 0xee;
	if ((rc = vs_vq_drv_add(vq, bufs, 2, &head)))
		return rc;
	if (vs_vq_drv_should_kick(vq) &&
	    write(fe->kick[VS_VIRTIO_SCSI_VQ_CTRL], &one, sizeof(one)) != sizeof(one))
		return -errno;
	if ((rc = fe_wait_used(fe, VS_VIRTIO_SCSI_VQ_CTRL, &h, &len, FE_WAIT_MS)))
		return rc;
	if (h != head || len != 1)
		return -EPROTO;
	*response = *(uint8_t *)gmem_host(fe->g, base + SLOT_RESP);
	return 0;
}

/* ---- sense and CDBs ------------------------------------------------------------------------ */
int sense_key(const struct vs_virtio_scsi_cmd_resp *r)
{
	return vs_le32(r->sense_len) >= 3 ? r->sense[2] & 0x0f : -1;
}

int sense_asc(const struct vs_virtio_scsi_cmd_resp *r)
{
	return vs_le32(r->sense_len) >= 13 ? r->sense[12] : -1;
}

int sense_ascq(const struct vs_virtio_scsi_cmd_resp *r)
{
	return vs_le32(r->sense_len) >= 14 ? r->sense[13] : -1;
}

int sense_field(const struct vs_virtio_scsi_cmd_resp *r)
{
	if (vs_le32(r->sense_len) < 18 || !(r->sense[15] & 0x80))
		return -1;
	return r->sense[16] << 8 | r->sense[17];
}

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

void cdb16(uint8_t *cdb, uint8_t op, uint8_t b1, uint64_t lba, uint32_t n)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	cdb[1] = b1;
	put_be(cdb + 2, lba, 8);
	put_be(cdb + 10, n, 4);
}

void cdb10(uint8_t *cdb, uint8_t op, uint8_t b1, uint32_t lba, uint16_t n)
{
	memset(cdb, 0, 10);
	cdb[0] = op;
	cdb[1] = b1;
	put_be(cdb + 2, lba, 4);
	put_be(cdb + 7, n, 2);
}

/* ---- sessions ------------------------------------------------------------------------------- */
static void sess_clear(struct sess *s)
{
	memset(s, 0, sizeof(*s));
	s->p.pid = -1;
	s->p.pidfd = -1;
	s->g.fd = -1;
	s->fe.drv.sock = -1;
	for (unsigned q = 0; q < FE_MAXQ; q++)
		s->fe.kick[q] = s->fe.call[q] = -1;
}

int sess_start(struct sess *s, const char *const *args, const struct fe_opts *o)
{
	int rc;

	sess_clear(s);
	if ((rc = gmem_init(&s->g)) || (rc = proc_start(&s->p, args)))
		return rc;
	if (o && (rc = fe_open(&s->fe, s->p.sock, &s->g, o))) {
		fprintf(stderr, "frontend set-up failed: %s\n", strerror(-rc));
		proc_log_dump(&s->p);
	}
	return rc;
}

int sess_reconnect(struct sess *s, const struct fe_opts *o)
{
	fe_close(&s->fe);
	return fe_open(&s->fe, s->p.sock, &s->g, o);
}

int sess_end(struct sess *s)
{
	int sig, rc;

	fe_close(&s->fe);
	rc = proc_stop(&s->p, SIGTERM, FE_WAIT_MS, &sig);
	if (rc != 0) {
		fprintf(stderr, "target: exit status %d, signal %d\n", rc, sig);
		proc_log_dump(&s->p);
	}
	proc_cleanup(&s->p);
	gmem_fini(&s->g);
	return rc;
}

int sess_setup(void **state)
{
	struct sess *s = malloc(sizeof(*s));

	if (!s)
		return -1;
	sess_clear(s);
	*state = s;
	return 0;
}

int sess_teardown(void **state)
{
	struct sess *s = *state;

	/* A failed test leaves its target running: it must not outlive the test. */
	fe_close(&s->fe);
	if (s->p.pid > 0)
		proc_stop(&s->p, SIGKILL, FE_WAIT_MS, NULL);
	if (s->p.dir[0])
		proc_cleanup(&s->p);
	gmem_fini(&s->g);
	free(s);
	return 0;
}

int fe_read_ok(struct fe *fe, unsigned q, uint32_t lba)
{
	struct fe_cmd c = {.in_len = 512};
	int rc;

	cdb10(c.cdb, 0x28, 0, lba, 1);
	if ((rc = fe_scsi(fe, q, &c)))
		return rc;
	return c.resp.response == VS_VIRTIO_SCSI_S_OK && c.resp.status == 0 ? 0 : -EIO;
}
