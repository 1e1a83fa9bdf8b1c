/* SPDX-License-Identifier: MIT */
/*
 * vhost-user codec: every supported request round-trips through a socket pair with its
 * fds; every malformed variant is refused with a reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vhost/vhost_msg.h"

static void msg_init(struct vs_vhost_msg *m, uint32_t req, uint32_t size)
{
	memset(m, 0, sizeof(*m));
	m->request = req;
	m->flags = VS_VHOST_VERSION;
	m->size = size;
	for (unsigned i = 0; i < VS_VHOST_MAX_FDS; i++)
		m->fds[i] = -1;
}

static void add_fd(struct vs_vhost_msg *m)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	m->fds[m->nfds++] = fd;
}

static void region(struct vs_vhost_mem_region *r, uint64_t gpa, uint64_t size, uint64_t off)
{
	r->guest_phys_addr = gpa;
	r->memory_size = size;
	r->userspace_addr = 0x7f0000000000ull + gpa;
	r->mmap_offset = off;
}

/* ---- a valid message of each supported request type ------------------------------------- */
static void mk_valid(struct vs_vhost_msg *m, uint32_t req)
{
	switch (req) {
	case VS_VHOST_SET_FEATURES:
	case VS_VHOST_SET_PROTOCOL_FEATURES:
	case VS_VHOST_SET_STATUS:
		msg_init(m, req, 8);
		m->payload.u64 = 0x140000000ull;
		break;
	case VS_VHOST_SET_MEM_TABLE:
		msg_init(m, req, 8 + 2 * 32);
		m->payload.memory.nregions = 2;
		region(&m->payload.memory.regions[0], 0, 0xa0000, 0);
		region(&m->payload.memory.regions[1], 0xc0000, 0x3ff40000, 0xc0000);
		add_fd(m);
		add_fd(m);
		break;
	case VS_VHOST_SET_LOG_BASE:
		msg_init(m, req, 16);
		m->payload.log.mmap_size = 4096;
		add_fd(m);
		break;
	case VS_VHOST_SET_LOG_FD:
	case VS_VHOST_SET_SLAVE_REQ_FD:
		msg_init(m, req, 0);
		add_fd(m);
		break;
	case VS_VHOST_SET_VRING_NUM:
		msg_init(m, req, 8);
		m->payload.state = (struct vs_vhost_vring_state){.index = 2, .num = 256};
		break;
	case VS_VHOST_SET_VRING_BASE:
	case VS_VHOST_GET_VRING_BASE:
	case VS_VHOST_SET_VRING_ENABLE:
		msg_init(m, req, 8);
		m->payload.state = (struct vs_vhost_vring_state){.index = 1, .num = 1};
		break;
	case VS_VHOST_SET_VRING_ADDR:
		msg_init(m, req, 40);
		m->payload.addr.index = 3;
		m->payload.addr.desc_user_addr = 0x7f0000100000ull;
		m->payload.addr.avail_user_addr = 0x7f0000101000ull;
		m->payload.addr.used_user_addr = 0x7f0000102000ull;
		break;
	case VS_VHOST_SET_VRING_KICK:
	case VS_VHOST_SET_VRING_ERR:
		msg_init(m, req, 8);
		m->payload.u64 = 5;
		add_fd(m);
		break;
	case VS_VHOST_SET_VRING_CALL: /* the no-fd form */
		msg_init(m, req, 8);
		m->payload.u64 = 7 | VS_VHOST_VRING_NOFD;
		break;
	case VS_VHOST_GET_CONFIG:
	case VS_VHOST_SET_CONFIG:
		msg_init(m, req, 12 + 4);
		m->payload.config.size = 4;
		memcpy(m->payload.config.region, "\x01\x02\x03\x04", 4);
		break;
	case VS_VHOST_GET_INFLIGHT_FD:
	case VS_VHOST_SET_INFLIGHT_FD:
		msg_init(m, req, 24);
		m->payload.inflight.num_queues = 3;
		m->payload.inflight.queue_size = 128;
		if (req == VS_VHOST_SET_INFLIGHT_FD)
			add_fd(m);
		break;
	case VS_VHOST_ADD_MEM_REG:
	case VS_VHOST_REM_MEM_REG:
		msg_init(m, req, 40);
		region(&m->payload.mem_reg.region, 0x100000000ull, 0x40000000ull, 0);
		if (req == VS_VHOST_ADD_MEM_REG)
			add_fd(m);
		break;
	default: /* requests without a payload */
		msg_init(m, req, 0);
		break;
	}
}

static const uint32_t valid_reqs[] = {
    VS_VHOST_GET_FEATURES,
    VS_VHOST_SET_FEATURES,
    VS_VHOST_SET_OWNER,
    VS_VHOST_RESET_OWNER,
    VS_VHOST_SET_MEM_TABLE,
    VS_VHOST_SET_LOG_BASE,
    VS_VHOST_SET_LOG_FD,
    VS_VHOST_SET_VRING_NUM,
    VS_VHOST_SET_VRING_ADDR,
    VS_VHOST_SET_VRING_BASE,
    VS_VHOST_GET_VRING_BASE,
    VS_VHOST_SET_VRING_KICK,
    VS_VHOST_SET_VRING_CALL,
    VS_VHOST_SET_VRING_ERR,
    VS_VHOST_GET_PROTOCOL_FEATURES,
    VS_VHOST_SET_PROTOCOL_FEATURES,
    VS_VHOST_GET_QUEUE_NUM,
    VS_VHOST_SET_VRING_ENABLE,
    VS_VHOST_SET_SLAVE_REQ_FD,
    VS_VHOST_GET_CONFIG,
    VS_VHOST_SET_CONFIG,
    VS_VHOST_GET_INFLIGHT_FD,
    VS_VHOST_SET_INFLIGHT_FD,
    VS_VHOST_RESET_DEVICE,
    VS_VHOST_GET_MAX_MEM_SLOTS,
    VS_VHOST_ADD_MEM_REG,
    VS_VHOST_REM_MEM_REG,
    VS_VHOST_SET_STATUS,
    VS_VHOST_GET_STATUS,
};
#define NVALID (sizeof(valid_reqs) / sizeof(valid_reqs[0]))

static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Scenario: a valid message of one request type is sent over a socket pair and received
 * back identical, its fds referring to the same files. */
static void test_round_trip(void **state)
{
	uint32_t req = *(const uint32_t *)*state;
	struct vs_vhost_msg m, r;
	char why[192] = "";
	int sv[2];

	mk_valid(&m, req);
	assert_int_equal(vs_vhost_msg_validate(&m, why, sizeof(why)), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(vs_vhost_msg_send(sv[0], &m), 0);
	int rc = vs_vhost_msg_recv(sv[1], &r, why, sizeof(why));
	if (rc)
		fail_msg("%s: %s", vs_vhost_request_name(req), why);
	assert_int_equal(r.request, m.request);
	assert_int_equal(r.flags, m.flags);
	assert_int_equal(r.size, m.size);
	assert_memory_equal(&r.payload, &m.payload, m.size);
	assert_int_equal(r.nfds, m.nfds);
	for (unsigned i = 0; i < m.nfds; i++)
		assert_true(same_file(r.fds[i], m.fds[i]));
	vs_vhost_msg_close_fds(&r);
	vs_vhost_msg_close_fds(&m);
	close(sv[0]);
	close(sv[1]);
}

/* ---- malformed variants ----------------------------------------------------------------- */
struct bad_case {
	const char *name;
	void (*mk)(struct vs_vhost_msg *m);
	const char *why; /* a word the reason must contain */
};

static void bad_size(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_FEATURES);
	m->size = 4;
}
static void bad_size_get(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_GET_FEATURES);
	m->size = 8;
}
static void bad_addr_size(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_ADDR);
	m->size = 32;
}
static void bad_memtable_size(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	m->size = 8 + 32 * 8; /* the whole array, not nregions' worth */
}
static void too_many_regions(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	m->payload.memory.nregions = 9;
}
static void gpa_overflow(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	m->payload.memory.regions[1].guest_phys_addr = UINT64_MAX - 0x1000;
}
static void uva_overflow(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	m->payload.memory.regions[0].userspace_addr = UINT64_MAX - 0x1000;
}
static void offset_overflow(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_ADD_MEM_REG);
	m->payload.mem_reg.region.mmap_offset = UINT64_MAX;
}
static void zero_region(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	m->payload.memory.regions[1].memory_size = 0;
}
static void memtable_few_fds(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_MEM_TABLE);
	close(m->fds[--m->nfds]);
}
static void kick_no_fd(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_KICK);
	close(m->fds[--m->nfds]);
}
static void call_nofd_with_fd(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_CALL);
	add_fd(m);
}
static void fd_on_get_features(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_GET_FEATURES);
	add_fd(m);
}
static void add_reg_no_fd(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_ADD_MEM_REG);
	close(m->fds[--m->nfds]);
}
static void version_0(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_OWNER);
	m->flags = 0;
}
static void version_2(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_OWNER);
	m->flags = 2;
}
static void reply_flag(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_OWNER);
	m->flags |= VS_VHOST_FLAG_REPLY;
}
static void unknown_req(struct vs_vhost_msg *m)
{
	mk_valid(m, 0);
	m->request = 99;
}
static void unsupported_req(struct vs_vhost_msg *m)
{
	mk_valid(m, 0);
	m->request = 19;
}
static void ring_index(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_NUM);
	m->payload.state.index = VS_VHOST_MAX_QUEUES;
}
static void ring_size_odd(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_NUM);
	m->payload.state.num = 100;
}
static void ring_size_big(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_NUM);
	m->payload.state.num = 65536;
}
static void ring_base_big(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_BASE);
	m->payload.state.num = 0x10000;
}
static void enable_2(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_ENABLE);
	m->payload.state.num = 2;
}
static void kick_reserved(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_VRING_KICK);
	m->payload.u64 |= 1ull << 40;
}
static void config_big(struct vs_vhost_msg *m)
{
	mk_valid(m, VS_VHOST_SET_CONFIG);
	m->payload.config.size = 257; /* the payload size still says 4 bytes */
}

static const struct bad_case bad_cases[] = {
    {"bad size for SET_FEATURES", bad_size, "needs 8"},
    {"payload on GET_FEATURES", bad_size_get, "needs 0"},
    {"short SET_VRING_ADDR", bad_addr_size, "needs 40"},
    {"memory table size != nregions", bad_memtable_size, "needs 72"},
    {"too many regions", too_many_regions, "at most 8"},
    {"region gpa + size overflows", gpa_overflow, "guest range wraps"},
    {"region uva + size overflows", uva_overflow, "user range wraps"},
    {"region offset + size overflows", offset_overflow, "offset"},
    {"zero-sized region", zero_region, "size 0"},
    {"SET_MEM_TABLE with too few fds", memtable_few_fds, "2 regions but 1 fds"},
    {"KICK without fd or NOFD", kick_no_fd, "need 1"},
    {"CALL with NOFD and an fd", call_nofd_with_fd, "NOFD"},
    {"fd on GET_FEATURES", fd_on_get_features, "takes 0..0"},
    {"ADD_MEM_REG without fd", add_reg_no_fd, "takes 1..1"},
    {"version 0 in flags", version_0, "version"},
    {"version 2 in flags", version_2, "version"},
    {"reply flag on a request", reply_flag, "reply flag"},
    {"unknown request", unknown_req, "unknown request 99"},
    {"unsupported request", unsupported_req, "unsupported"},
    {"ring index too large", ring_index, "ring index"},
    {"ring size not a power of two", ring_size_odd, "power of two"},
    {"ring size above 32768", ring_size_big, "power of two"},
    {"ring base above 16 bits", ring_base_big, "16 bits"},
    {"enable value 2", enable_2, "0 or 1"},
    {"reserved bits in KICK", kick_reserved, "reserved"},
    {"config size above 256", config_big, "config size"},
};
#define NBAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

static size_t encode(const struct vs_vhost_msg *m, uint8_t *buf)
{
	memcpy(buf, &m->request, 4);
	memcpy(buf + 4, &m->flags, 4);
	memcpy(buf + 8, &m->size, 4);
	memcpy(buf + 12, &m->payload,
	       m->size < VS_VHOST_MAX_PAYLOAD ? m->size : VS_VHOST_MAX_PAYLOAD);
	return 12 + m->size;
}

/* Scenario: one malformed message is refused by validate, parse and recv alike, with a
 * reason, and recv closes its fds. */
static void test_rejected(void **state)
{
	const struct bad_case *c = *state;
	uint8_t buf[12 + VS_VHOST_MAX_PAYLOAD];
	struct vs_vhost_msg m, p;
	char why[192] = "";
	int sv[2];

	c->mk(&m);
	assert_int_equal(vs_vhost_msg_validate(&m, why, sizeof(why)), -EBADMSG);
	if (!strstr(why, c->why))
		fail_msg("%s: reason \"%s\" lacks \"%s\"", c->name, why, c->why);

	why[0] = 0;
	size_t len = encode(&m, buf);
	assert_int_equal(vs_vhost_msg_parse(buf, len, m.fds, m.nfds, &p, why, sizeof(why)),
			 -EBADMSG);
	assert_non_null(strstr(why, c->why));
	assert_int_equal(p.request, m.request); /* header kept for a NEED_REPLY answer */

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(vs_vhost_msg_send(sv[0], &m), 0);
	assert_int_equal(vs_vhost_msg_recv(sv[1], &p, why, sizeof(why)), -EBADMSG);
	assert_int_equal(p.nfds, 0);
	vs_vhost_msg_close_fds(&m);
	close(sv[0]);
	close(sv[1]);
}

/* Scenario: framing errors in a buffer are -EPROTO with a reason. */
static void test_parse_framing(void **state)
{
	uint8_t buf[12 + VS_VHOST_MAX_PAYLOAD + 8];
	struct vs_vhost_msg m, p;
	char why[192];
	(void)state;

	mk_valid(&m, VS_VHOST_SET_FEATURES);
	size_t len = encode(&m, buf);
	assert_int_equal(vs_vhost_msg_parse(buf, len, NULL, 0, &p, why, sizeof(why)), 0);
	assert_int_equal(p.payload.u64, m.payload.u64);

	assert_int_equal(vs_vhost_msg_parse(buf, 8, NULL, 0, &p, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "truncated header"));
	assert_int_equal(vs_vhost_msg_parse(buf, len - 4, NULL, 0, &p, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "truncated payload"));
	assert_int_equal(vs_vhost_msg_parse(buf, len + 4, NULL, 0, &p, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "after the payload"));
	uint32_t huge = 1000;
	memcpy(buf + 8, &huge, 4);
	assert_int_equal(vs_vhost_msg_parse(buf, sizeof(buf), NULL, 0, &p, why, sizeof(why)),
			 -EPROTO);
	assert_non_null(strstr(why, "too large"));
}

/* Scenario: a header cut short by the peer closing is -EPROTO; a close between messages
 * is -ECONNRESET. */
static void test_recv_truncated(void **state)
{
	struct vs_vhost_msg m;
	char why[192];
	int sv[2];
	(void)state;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[0], "\x01\x00\x00\x00\x01\x00", 6), 6);
	close(sv[0]);
	assert_int_equal(vs_vhost_msg_recv(sv[1], &m, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "truncated header"));
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	uint8_t hdr[12] = {2, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0}; /* SET_FEATURES, size 8 */
	assert_int_equal(write(sv[0], hdr, 12), 12);
	assert_int_equal(write(sv[0], "1234", 4), 4);
	close(sv[0]);
	assert_int_equal(vs_vhost_msg_recv(sv[1], &m, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "truncated payload"));
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[0]);
	assert_int_equal(vs_vhost_msg_recv(sv[1], &m, why, sizeof(why)), -ECONNRESET);
	close(sv[1]);
}

/* Scenario: a message carrying more fds than the protocol allows (the control buffer
 * truncates) is -EPROTO and leaks no fd. */
static void test_recv_too_many_fds(void **state)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 12)];
		struct cmsghdr align;
	} ctl;
	uint8_t hdr[12] = {3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}; /* SET_OWNER */
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct vs_vhost_msg m;
	int fds[12], sv[2], probe;
	char why[192];
	(void)state;

	for (int i = 0; i < 12; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(sendmsg(sv[0], &mh, 0), 12);
	for (int i = 0; i < 12; i++)
		close(fds[i]);
	probe = open("/dev/null", O_RDONLY); /* lowest free fd before */
	close(probe);
	assert_int_equal(vs_vhost_msg_recv(sv[1], &m, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "truncated"));
	int after = open("/dev/null", O_RDONLY);
	assert_int_equal(after, probe); /* every received fd was closed again */
	close(after);
	close(sv[0]);
	close(sv[1]);
}

/* Scenario: every request we name has a name, and unknown numbers are "UNKNOWN". */
static void test_names(void **state)
{
	(void)state;
	assert_string_equal(vs_vhost_request_name(VS_VHOST_SET_MEM_TABLE), "SET_MEM_TABLE");
	assert_string_equal(vs_vhost_request_name(VS_VHOST_GET_STATUS), "GET_STATUS");
	assert_string_equal(vs_vhost_request_name(0), "UNKNOWN");
	assert_string_equal(vs_vhost_request_name(1000), "UNKNOWN");
}

int main(void)
{
	struct CMUnitTest tests[NVALID + NBAD + 8];
	static char names[NVALID][64];
	size_t n = 0;

	for (size_t i = 0; i < NVALID; i++) {
		snprintf(names[i], sizeof(names[i]), "round trip %s",
			 vs_vhost_request_name(valid_reqs[i]));
		tests[n++] = (struct CMUnitTest){names[i], test_round_trip, NULL, NULL,
						 (void *)&valid_reqs[i]};
	}
	for (size_t i = 0; i < NBAD; i++)
		tests[n++] = (struct CMUnitTest){bad_cases[i].name, test_rejected, NULL, NULL,
						 (void *)&bad_cases[i]};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_parse_framing);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_recv_truncated);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_recv_too_many_fds);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_names);
	return _cmocka_run_group_tests("vhost.msg", tests, n, NULL, NULL);
}
