/* SPDX-License-Identifier: MIT */
/*
 * The malicious-frontend harness: a real `vioscope target` process on a temporary socket
 * (started by the test, stopped by PID, its stderr kept in a file), and a frontend that
 * speaks vhost-user to it over that socket, able to send any message with any fds, and a
 * guest (memfd memory, driver-side rings, SCSI commands) to go with it.
 *
 * Guest memory layout (FE_MEM bytes, one memfd; regions as QEMU makes them: a hole at
 * [0xa0000, 0xc0000)):
 *   0x100000 + q * 1 MiB     ring of queue q (up to 32768 entries)
 *   0x600000 + s * 0x2000    command slot s: header, response, indirect table, 4 KiB data
 *   0x1000000 ... 0x3000000  FE_BIG: a 32 MiB data buffer
 * Every wait has a deadline; functions return 0 / -errno and tests assert.
 */
#ifndef TESTS_HOSTILE_H
#define TESTS_HOSTILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "deadline.h"
#include "gate.h"
#include "proto/virtio_scsi_proto.h"
#include "vhost/vhost_drv.h"
#include "vhost/vhost_msg.h"
#include "virtio/virtio.h"

#define FE_MEM	     (64ull << 20)
#define FE_GAP_START 0xa0000ull
#define FE_GAP_END   0xc0000ull
#define FE_RING(q)   (0x100000ull + (uint64_t)(q) * 0x100000)
#define FE_SLOT(s)   (0x600000ull + (uint64_t)(s) * 0x2000)
#define FE_SLOTS     1024
#define FE_BIG	     0x1000000ull
#define FE_BIG_LEN   (32u << 20)
#define FE_MAXQ	     6 /* control, event, up to 4 request queues */
#define FE_WAIT_MS   20000

extern const char *vioscope; /* the binary under test: argv[1] */

/* The start of a test's main(): vioscope from argv[1] (2 after the usage when it is
 * missing), SIGPIPE ignored.  return hostile_init(argc, argv) ?: cmocka_run_group_tests(...) */
int hostile_init(int argc, char **argv);

/* ---- the target process ------------------------------------------------------------------ */
struct proc {
	pid_t pid;
	int pidfd;
	char dir[64];
	char sock[96]; /* where it listens */
	char log[96];  /* its stderr */
	char file[96]; /* a 64 MiB image file, for file LUNs ("file=%F" in a spec) */
	char rpc[96];  /* a management socket path ("--rpc", "%R") */
};

/* Start `vioscope target --socket DIR/sock ARGS...` (NULL-terminated; "%F" in an argument
 * becomes the image file's path, "%R" the management socket's, "%D" the temporary
 * directory's) and wait until the socket
 * accepts connections. */
int proc_start(struct proc *p, const char *const *args);
/* One JSON-RPC request line on the management socket (started with "--rpc", "%R"): the
 * reply line (NUL-terminated, without its newline) in reply, 0 or -errno (-ETIMEDOUT when
 * no whole line came within timeout_ms). */
int proc_rpc(struct proc *p, const char *request, char *reply, size_t len, int timeout_ms);
/* Signal it and wait for its exit: the exit status, or -1 if it did not exit (it is then
 * killed) or died of a signal (*sig set). */
int proc_stop(struct proc *p, int signo, int timeout_ms, int *sig);
/* The process is still running. */
bool proc_alive(struct proc *p);
/* Wait until its stderr holds `needle` (false at the deadline). */
bool proc_log_wait(struct proc *p, const char *needle, int timeout_ms);
/* Print its stderr (for a failing test). */
void proc_log_dump(struct proc *p);
/* Open file descriptors of the process (entries of /proc/PID/fd). */
int proc_fd_count(struct proc *p);
/* Remove the temporary directory and what is in it (after proc_stop). */
void proc_cleanup(struct proc *p);

/* ---- the management socket (--rpc PATH) and the test gate (gate-sock=PATH) ----------------- */
/* Connect to the management socket at path, waiting for it to appear: the fd or -errno. */
int rpc_open(const char *path);
/* The test gate's socket (gate-sock=PATH) and line I/O: tests/common/gate.h. */

/* ---- guest memory ------------------------------------------------------------------------ */
struct gmem {
	int fd;
	uint8_t *mem; /* our mapping: its addresses are the "user addresses" */
};
int gmem_init(struct gmem *g);
void gmem_fini(struct gmem *g);
static inline void *gmem_host(struct gmem *g, uint64_t gpa)
{
	return g->mem + gpa;
}
/* The two regions QEMU would send for this memory (fd = g->fd for both). */
void gmem_regions(struct gmem *g, struct vs_vhost_mem_region r[2]);

/* ---- the frontend ------------------------------------------------------------------------ */
struct fe {
	struct vs_vhost_drv drv; /* drv.sock: the connection */
	struct gmem *g;
	uint64_t features;
	unsigned nq;		      /* rings set up */
	unsigned qsize[FE_MAXQ];      /* entries per ring */
	struct vs_vq_drv vq[FE_MAXQ];
	int kick[FE_MAXQ], call[FE_MAXQ];
	bool no_kick; /* fe_post makes chains available without kicking */
};

struct fe_opts {
	unsigned nq;		   /* rings to set up (2 + request queues) */
	unsigned qsize[FE_MAXQ];   /* 0: 128 */
	bool no_indirect;	   /* do not negotiate INDIRECT_DESC */
	bool no_rings;		   /* negotiate and send the memory table only */
};

/* Connect (no message yet). */
int fe_connect(struct fe *fe, const char *sock, struct gmem *g);
/* Negotiate, send the memory table, set up and enable the rings. */
int fe_setup(struct fe *fe, const struct fe_opts *o);
/* connect + setup. */
int fe_open(struct fe *fe, const char *sock, struct gmem *g, const struct fe_opts *o);
void fe_close(struct fe *fe);

/* Send any message: payload of size bytes, nfds fds. */
int fe_send(struct fe *fe, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
	    const int *fds, unsigned nfds);
/* Receive a reply (the socket's receive timeout bounds it). */
int fe_reply(struct fe *fe, struct vs_vhost_msg *reply);
/* Send with NEED_REPLY and return the u64 status the target answered (0 ok), or -errno. */
int64_t fe_ask(struct fe *fe, uint32_t request, const void *payload, uint32_t size, const int *fds,
	       unsigned nfds);
/* The target closed the connection within timeout_ms. */
bool fe_dropped(struct fe *fe, int timeout_ms);

/* ---- the guest on top of it ---------------------------------------------------------------- */
struct fe_cmd {
	unsigned lun;
	uint64_t tag;
	uint8_t cdb[32];
	const void *out; /* data-out, copied into the slot (<= 4 KiB) ... */
	uint32_t out_len;
	uint32_t in_len; /* data-in into the slot (<= 4 KiB) ... */
	uint64_t in_gpa; /* ... or here, when set (e.g. FE_BIG) */
	uint64_t out_gpa; /* data-out from here, when set */
	/* results */
	struct vs_virtio_scsi_cmd_resp resp;
	uint32_t used_len;
};

/* Make command c available on queue q using slot s; *head identifies it. */
int fe_post(struct fe *fe, unsigned q, unsigned s, const struct fe_cmd *c, uint16_t *head);
/* Wait for the next used chain of queue q (by its call fd, or polling when it has none). */
int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len, int timeout_ms);
/* Copy slot s's response into c. */
void fe_result(struct fe *fe, unsigned s, struct fe_cmd *c);
/* Data-in of slot s. */
void *fe_slot_in(struct fe *fe, unsigned s);
/* post + wait + result, on slot 0 of queue q. */
int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c);
/* One TMF on the control queue (slot FE_SLOTS - 1); *response. */
int fe_tmf(struct fe *fe, uint32_t subtype, unsigned lun, uint64_t tag, uint8_t *response);

/* Sense of a CHECK CONDITION response: key, ASC, ASCQ (-1 when absent). */
int sense_key(const struct vs_virtio_scsi_cmd_resp *r);
int sense_asc(const struct vs_virtio_scsi_cmd_resp *r);
int sense_ascq(const struct vs_virtio_scsi_cmd_resp *r);
/* Sense-key specific field pointer (SKSV set): the byte, -1 when absent. */
int sense_field(const struct vs_virtio_scsi_cmd_resp *r);

/* CDB builders (big-endian fields). */
void cdb16(uint8_t *cdb, uint8_t op, uint8_t b1, uint64_t lba, uint32_t n);
void cdb10(uint8_t *cdb, uint8_t op, uint8_t b1, uint32_t lba, uint16_t n);


/* ---- one target, one guest, one frontend: what most tests start with ------------------------ */
struct sess {
	struct proc p;
	struct gmem g;
	struct fe fe;
};
/* cmocka fixture: *state is a struct sess, not started; teardown kills a target a failed
 * test left running. */
int sess_setup(void **state);
int sess_teardown(void **state);
/* Start the target with args, connect and set up o->nq rings (a frontend left closed when
 * o is NULL).  0 or -errno, the target's stderr printed on failure. */
int sess_start(struct sess *s, const char *const *args, const struct fe_opts *o);
/* A fresh frontend on the same target and guest memory, as QEMU reconnecting would. */
int sess_reconnect(struct sess *s, const struct fe_opts *o);
/* SIGTERM: the target's exit status (0: it stopped cleanly and its flush ran), -1 when it
 * did not exit within the deadline or died of a signal; everything released. */
int sess_end(struct sess *s);

/* A READ(10) of one 512-byte block at lba of LUN 0 on queue q: 0 when it came back GOOD. */
int fe_read_ok(struct fe *fe, unsigned q, uint32_t lba);

#endif /* TESTS_HOSTILE_H */
