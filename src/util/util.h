/* SPDX-License-Identifier: MIT */
/*
 * util: the small helpers every layer and tool shares, written once: walking iovecs,
 * the monotonic clock, error reasons, lines for the operator, number parsing for command
 * lines, and the command table of the `vioscope` CLI.
 *
 * The floor of the tree: includes no other layer and is never traced itself.
 */
#ifndef VS_UTIL_H
#define VS_UTIL_H

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* vsnprintf, for VS_LOG_LINE */
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* ---- iovecs ----------------------------------------------------------------------------
 * Inline: they sit on every request's path (headers, RAM copies, data offsets), where a
 * call and the general case would cost more than the loop itself. */
/* The bytes iov[0..n) hold: false when the sum does not fit a size_t (*total unchanged). */
static inline bool vs_iov_total(const struct iovec *iov, unsigned n, size_t *total)
{
	size_t sum = 0;

	for (unsigned i = 0; i < n; i++) {
		if (iov[i].iov_len > SIZE_MAX - sum)
			return false;
		sum += iov[i].iov_len;
	}
	*total = sum;
	return true;
}

/* Copy between buf and the iovecs' bytes from `off` on, either way (use the two below). */
static inline size_t vs__iov_copy(const struct iovec *iov, unsigned n, size_t off, uint8_t *buf,
				  size_t len, bool to_iov)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t chunk = iov[i].iov_len;

		if (off >= chunk) {
			off -= chunk;
			continue;
		}
		chunk -= off;
		if (chunk > len - done)
			chunk = len - done;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, buf + done, chunk);
		else
			memcpy(buf + done, (const uint8_t *)iov[i].iov_base + off, chunk);
		done += chunk;
		off = 0;
	}
	return done;
}

/* Copy between a flat buffer and the iovecs' bytes from `off` on; returns the bytes
 * copied (fewer than len when the iovecs end first). */
static inline size_t vs_iov_to_buf(const struct iovec *iov, unsigned n, size_t off, void *buf,
				   size_t len)
{
	return vs__iov_copy(iov, n, off, buf, len, false);
}

static inline size_t vs_iov_from_buf(const struct iovec *iov, unsigned n, size_t off,
				     const void *buf, size_t len)
{
	return vs__iov_copy(iov, n, off, (uint8_t *)(uintptr_t)buf, len, true);
}

/* Where byte *off lies: returns the index of its iovec and leaves in *off the offset inside
 * it (n, with *off what is left over, when the iovecs end first). */
static inline unsigned vs_iov_skip(const struct iovec *iov, unsigned n, size_t *off)
{
	unsigned i = 0;

	while (i < n && *off >= iov[i].iov_len)
		*off -= iov[i++].iov_len;
	return i;
}

/* The iovecs from byte off on, into dst[0..max): returns the entries written (the first one
 * cut to start at off; fewer than needed when max runs out). */
static inline unsigned vs_iov_tail(struct iovec *dst, unsigned max, const struct iovec *iov,
				   unsigned n, size_t off)
{
	unsigned i = vs_iov_skip(iov, n, &off), k = 0;

	for (; i < n && k < max; i++, k++) {
		dst[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		dst[k].iov_len = iov[i].iov_len - off;
		off = 0;
	}
	return k;
}

/* ---- clock ----------------------------------------------------------------------------- */
/* CLOCK_MONOTONIC in nanoseconds: deadlines, latencies, rates. */
static inline uint64_t vs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The time-stamp counter (0 off x86: callers check vs_tsc_clock first).  Inline: the
 * statistics read it on the request path. */
static inline uint64_t vs_rdtsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return 0;
#endif
}

/* ---- the TSC as a clock (clock.c, built into the trace runtime too) --------------------
 * One choice and one calibration for every user of the TSC: the trace runtime's event
 * timestamps and the target's statistics. */
/* Should this process time with the TSC?  Yes when it is invariant (constant rate, runs
 * in deep C-states: CPUID 0x80000007 EDX bit 8), unless the environment variable
 * `force_env` is "monotonic": each user has its own (VIOSCOPE_TRACE_CLOCK,
 * VIOSCOPE_STATS_CLOCK: docs/TRACING.md, docs/TARGET.md). */
bool vs_tsc_clock(const char *force_env);
/* The TSC's rate in ns per tick, measured once per process (the first call takes 5 ms)
 * against CLOCK_MONOTONIC; 0 when it cannot be (no invariant TSC, a clock that did not
 * advance). */
double vs_tsc_ns_per_tick(void);
/* One calibration point: the event clock (TSC, or CLOCK_MONOTONIC when `tsc` is false),
 * CLOCK_MONOTONIC and CLOCK_REALTIME read at one instant: the points a TSC is calibrated
 * on (the trace runtime and tools: two processes' events are joined on them; the target's
 * statistics).  They must be tight: a preemption or a first-call page fault between the
 * reads would put one process's events microseconds off another's.  The TSC is read before
 * and after the two clocks, a few times, and the narrowest pair's midpoint is kept
 * (typically within 20 ns). */
void vs_clock_sample(bool tsc, uint64_t *ts, uint64_t *mono, uint64_t *real);

/* ---- random numbers -------------------------------------------------------------------- */
/* xorshift64: fast, repeatable sequences (workloads, test choices), not for secrets.  The
 * state must not be 0. */
static inline uint64_t vs_xorshift64(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/* ---- error reasons --------------------------------------------------------------------- */
/* Write the reason for a failure into why[whylen] (nothing when why is NULL or whylen 0)
 * and return rc, so that `return vs_fail(why, whylen, -EINVAL, "...", ...);` reports and
 * fails in one statement. */
int vs_fail(char *why, size_t whylen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int vs_vfail(char *why, size_t whylen, int rc, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* ---- lines for the operator ----------------------------------------------------------- */
/* Where a layer's lines for the operator go besides its trace: the embedder's callback (the
 * `log` of the target's and of the RPC server's config), or nowhere when fn is NULL. */
struct vs_log_sink {
	void (*fn)(void *arg, const char *line);
	void *arg;
};

/* The body of a layer's printf-like log function, fmt its last named parameter: format one
 * line (cut at 511 bytes), record it as a trace event of LEVEL and FLAG (as in
 * VS_ERROR(VHOST, ...)), then hand it to *sink.  A macro, so that the event is the caller's,
 * of its layer's provider (util is never traced): the caller includes <vioscope/trace.h>. */
#define VS_LOG_LINE(sink, level, flag, fmt)                                                        \
	do {                                                                                       \
		char vs__line[512];                                                                \
		va_list vs__ap;                                                                    \
		va_start(vs__ap, fmt);                                                             \
		vsnprintf(vs__line, sizeof(vs__line), fmt, vs__ap);                                \
		va_end(vs__ap);                                                                    \
		VS_##level(flag, "%s", vs__line);                                                  \
		if ((sink)->fn)                                                                    \
			(sink)->fn((sink)->arg, vs__line);                                         \
	} while (0)

/* ---- numbers --------------------------------------------------------------------------- */
/* Strict decimal in [min, max] (no sign, no space, nothing after): 0 or -EINVAL/-ERANGE. */
int vs_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A size in bytes with an optional suffix, either case: K, M, G, T, P, E alone or followed
 * by iB or B ("64M", "1GiB", "4KB": all powers of 1024, as fio takes them by default), or B.
 * 0, -EINVAL (malformed: "1.5G", "-5") or -ERANGE (more than INT64_MAX bytes: a size must
 * fit off_t). */
int vs_parse_size(const char *s, uint64_t *out);
/* A non-negative decimal time in seconds, with an optional unit as fio takes it: us, ms, s,
 * m or min (minutes), h, d ("2", "0.5", "500ms", "1m"): 0 or -EINVAL. */
int vs_parse_seconds(const char *s, double *out);

/* ---- the command line ------------------------------------------------------------------ */
/* Option values for CLI commands: parse, and on failure print
 *   "<cmd>: --<opt> '<arg>': expected a whole number in MIN..MAX"   (or a time)
 * to stderr and return -1 (the command then exits 2). */
int vs_cli_uint(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t max,
		uint64_t *out);
int vs_cli_seconds(const char *cmd, const char *opt, const char *arg, double min, double max,
		   double *out);

/* Every command's exit status (README, "Exit status"): what a script tests.  USAGE is a
 * mistake in the command line (an unknown option, a malformed size, level, flag or PID);
 * CANNOT_RUN is a correct command that could not do its job (no such socket, process or
 * file, a target that would not start), so that FAILED always means the thing tested or
 * asked for failed (a fault found, requests failed, an RPC error).  An interrupted command
 * exits 128 + the signal, after it stopped its children and removed what it made. */
enum vs_exit {
	VS_EXIT_OK = 0,
	VS_EXIT_FAILED = 1,
	VS_EXIT_USAGE = 2,
	VS_EXIT_CANNOT_RUN = 3,
	VS_EXIT_SIGINT = 130,
	VS_EXIT_SIGTERM = 143,
};

/* ---- interruption: Ctrl-C, SIGTERM, SIGHUP ------------------------------------------- */
/* A long command (bench, check, demo) ends cleanly when interrupted.  After
 * vs_interrupt_catch() those signals only note themselves (the first one, and when; a
 * blocking call that was waiting is restarted, a sleep returns early); the command looks at
 * vs_interrupted() in its loops, stops its children, removes what it made, prints what it
 * measured (and its seed) and returns vs_interrupt_status(rc): 128 + the signal. */
void vs_interrupt_catch(void);
int vs_interrupted(void);	  /* the first signal caught, or 0 */
uint64_t vs_interrupted_ns(void); /* when (CLOCK_MONOTONIC ns), or UINT64_MAX */
/* The flag itself, for a loop that takes a `volatile sig_atomic_t *stop` (trace record). */
volatile sig_atomic_t *vs_interrupt_flag(void);
int vs_interrupt_status(int rc);     /* 128 + the signal when interrupted, else rc */
const char *vs_signal_name(int sig); /* "SIGINT" */
/* Pass the signals on to target (a pid, or -pgid for a process group) the moment they are
 * caught, until vs_interrupt_pass_end(target); one caught before is passed on at once.
 * From one thread (the command's), for at most 8 targets. */
void vs_interrupt_pass(int target);
void vs_interrupt_pass_end(int target);
/* A job: `sh -c cmd` in a process group of its own that gets the signals caught meanwhile
 * (above), with its stdout into a pipe (*out_fd, the caller reads and closes it) or, when
 * out_fd is NULL, ours.  vs_job_start: 0 with *pid, or -errno.  vs_job_wait: its exit
 * status (128 + the signal that ended it), or -errno.  vs_job_run: both. */
int vs_job_start(const char *cmd, int *out_fd, int *pid);
int vs_job_wait(int pid);
int vs_job_run(const char *cmd);
/* Remove path and everything beneath it, links not followed, in this process (works after
 * Ctrl-C, when a job would get the signal): 0 (also when it is not there) or -errno. */
int vs_remove_tree(const char *path);

/* A `vioscope` subcommand.  Each command file registers itself with VS_CLI_COMMAND, so the
 * CLI's main() lists whatever was linked in (the benchmarks live outside tools/). */
struct vs_cli_command {
	const char *name;
	int (*fn)(int argc, char **argv); /* exit status: enum vs_exit */
	const char *help;
	int order;     /* position in the usage text */
	bool inspects; /* only looks at other processes' traces: gets no trace file itself */
};
#define VS_CLI_COMMAND_(id, order_, name_, fn_, help_, inspects_)                                  \
	static const struct vs_cli_command vs_cli_command_##id __attribute__((                     \
	    used, section("vs_cli_command_table"), aligned(8))) = {.name = (name_),                \
								   .fn = (fn_),                    \
								   .help = (help_),                \
								   .order = (order_),              \
								   .inspects = (inspects_)}
#define VS_CLI_COMMAND(id, order_, name_, fn_, help_)                                              \
	VS_CLI_COMMAND_(id, order_, name_, fn_, help_, false)
/* A command that only reads traces (`vioscope trace`): the tool then makes no trace
 * file of its own for it, so it never lists or records itself (tools/vioscope.c). */
#define VS_CLI_INSPECT_COMMAND(id, order_, name_, fn_, help_)                                      \
	VS_CLI_COMMAND_(id, order_, name_, fn_, help_, true)
/* The registered commands: [*first, *first + count). */
void vs_cli_commands(const struct vs_cli_command **first, size_t *count);

/* ---- help: one source per command ------------------------------------------------------
 * A command's (or subcommand's) help is data: its synopsis, what it does, its options with
 * their defaults, and further sections (exit status, examples...).  `--help` prints it,
 * `vioscope help --man` writes the man pages from it and `vioscope help --bash-completion`
 * the completion, and the command's option parser (vs_cli_next) is built from the same
 * option table, so that none of them can name an option the others do not.
 *
 * Text: paragraphs separated by a blank line ("\n\n") are filled to the width; a line that
 * starts with two spaces is kept as it is (examples, tables). */
struct vs_cli_opt {
	const char *name; /* the long option, without "--" */
	char short_name;  /* its one-letter form, or 0 */
	int key;	  /* what vs_cli_next returns for it: a letter, or >= 256 */
	const char *arg;  /* its value's name ("PATH"); NULL: a switch */
	const char *def;  /* its default ("30 s"), or NULL */
	const char *help; /* what it does (one paragraph) */
};
struct vs_cli_section {
	const char *title; /* "Exit status" */
	const char *text;
};
struct vs_cli_help {
	const char *name;     /* "target", "trace record": after "vioscope " */
	const char *summary;  /* one line: the man page's NAME, `vioscope --help`'s list */
	const char *synopsis; /* usage forms without "vioscope NAME " ('\n' between); a line
				 that starts with a space goes on with the form above */
	const char *text;     /* what it does */
	const struct vs_cli_opt *opts;	       /* up to {0}: --help and --version are added */
	const struct vs_cli_section *sections; /* up to {0}; may be NULL */
	const char *words; /* what its operands may be, for the completion ("lun_add ...") */
};
/* Register a struct vs_cli_help, so that the man pages and the completion find it.  (The
 * section is not named as a function is: GNU as takes a section's name for its start.) */
#define VS_CLI_HELP(var)                                                                           \
	static const struct vs_cli_help *const vs_cli_help_##var                                   \
	    __attribute__((used, section("vs_cli_help_table"), aligned(8))) = &(var)
/* The registered helps: [*first, *first + count), in link order. */
void vs_cli_helps(const struct vs_cli_help *const **first, size_t *count);
/* The help of "target", "trace record"...: NULL when that command has none registered. */
const struct vs_cli_help *vs_cli_help_find(const char *name);
/* Print it as --help does (to stdout for --help, stderr after a usage error). */
void vs_cli_help_print(const struct vs_cli_help *h, FILE *f);
/* The help source's text laid out: paragraphs filled to width after indent spaces,
 * kept lines as they are. */
void vs_cli_text_print(FILE *f, const char *text, unsigned indent, unsigned width);

/* This build, for --version and every --json: "0.1.0", the commit it was built from
 * ("f4fd8b3c07a1", "-dirty" when the tree had uncommitted changes; "unknown" outside git)
 * and its date, filled in by the build (tools/version.c.in). */
extern const char vs_cli_version[], vs_cli_commit[], vs_cli_commit_date[];
/* The trace flavour of this binary ("cold"), set by main. */
extern const char *vs_cli_flavour;
/* "vioscope 0.1.0 (commit f4fd8b3c07a1 of 2025-01-02, cold flavour)" and a newline. */
void vs_cli_version_print(FILE *f);
/* The JSON members every --json output starts with, without the braces:
 *   "vioscope": {"version": ..., "commit": ..., "flavour": ...},
 *   "time": "2025-01-02T10:11:12.345Z", "argv": ["vioscope", "bench", ...]
 * (the command line as given: with the defaults the help states, the configuration). */
void vs_cli_json_meta(FILE *f);
/* s as a JSON string, quotes included. */
void vs_cli_json_string(FILE *f, const char *s);
/* ISO 8601 UTC with milliseconds ("2025-01-02T10:11:12.345Z") of CLOCK_REALTIME now. */
void vs_cli_timestamp(char *buf, size_t len);

/* A command's option parser, built from its help's option table:
 *
 *	struct vs_cli_args a;
 *	int c;
 *
 *	vs_cli_begin(&a, &target_help, argc, argv);
 *	while ((c = vs_cli_next(&a)) != VS_CLI_END) {
 *		switch (c) {
 *		case VS_CLI_EXIT:	// --help or --version printed, or a bad option
 *			return a.status; // told (0, or VS_EXIT_USAGE)
 *		case 's': path = a.value; break;
 *		...
 *	}
 *	// operands: argv[a.next .. argc)
 *
 * Options may come anywhere among the operands (getopt_long's order); "--" ends them. */
enum { VS_CLI_END = -1, VS_CLI_EXIT = -2 };
#define VS_CLI_MAX_OPTS 48
struct vs_cli_args {
	const struct vs_cli_help *help;
	int argc;
	char **argv;
	const char *value;			  /* the current option's value */
	int next;				  /* after VS_CLI_END: the first operand */
	int status;				  /* after VS_CLI_EXIT: the exit status */
	struct option lopts[VS_CLI_MAX_OPTS + 3]; /* + help, version, the end */
	char sopts[2 * VS_CLI_MAX_OPTS + 8];
};
void vs_cli_begin(struct vs_cli_args *a, const struct vs_cli_help *h, int argc, char **argv);
int vs_cli_next(struct vs_cli_args *a);
/* "vioscope NAME: <message>" on stderr (the one error format of every command);
 * returns VS_EXIT_USAGE, for `return vs_cli_usage_error(...)`. */
int vs_cli_usage_error(const struct vs_cli_help *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same line for any status (a command that could not run, failed): returns status. */
int vs_cli_error(const struct vs_cli_help *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* main()'s argv, for commands that re-execute themselves (set by main). */
extern char **vs_cli_argv;
/* This binary's path (empty if unknown): commands run it again, or its siblings. */
void vs_self_exe(char *buf, size_t len);
/* Where a command makes its temporary files: $TMPDIR, else /tmp. */
const char *vs_tmp_dir(void);

/* ---- sockets ------------------------------------------------------------------------- */
/* Listen on the Unix socket path, owner-only (0600) from the moment it appears there: it
 * is bound and listening under a temporary name and renamed into place.  A stale socket
 * (nobody listening) is replaced; a live one or anything that is not a socket is refused.
 * The listening fd (close-on-exec), or -errno with why set; the caller unlinks path at
 * the end. */
int vs_listen_unix(const char *path, int backlog, char *why, size_t whylen);

/* ---- mappings guarded against SIGBUS (map_guard.c) ------------------------------------
 * A shared mapping whose file someone else can shrink (guest memory, another process's
 * trace file): an access past the file's new end raises SIGBUS.  A guarded mapping
 * instead reads as zeros from the faulting page to its end, and its owner is told. */
struct vs_map_fault {
	uintptr_t addr; /* the first faulting address, 0 while none (atomic) */
	int wake_fd;	/* an eventfd written after a fault, or -1 */
};
/* Guard [base, base + len), in `page`-sized pages (a power of two: the mapping's page
 * size); a fault in it is recorded in *fault, which must stay put until the guard is
 * removed (several mappings may share one).  Returns the guard's slot, or -errno
 * (-ENOSPC: 256 mappings are guarded already): then the mapping is not guarded and must
 * not be used. */
int vs_map_guard_add(void *base, size_t len, size_t page, struct vs_map_fault *fault);
/* Before the mapping goes (a slot < 0 is ignored). */
void vs_map_guard_remove(int slot);

/* ---- processes ------------------------------------------------------------------------ */
/* When process pid started (/proc/PID/stat, field 22: clock ticks since boot), which tells
 * a reused pid apart; 0 when unknown (proc_stat.c, built into the trace runtime too). */
uint64_t vs_proc_start_time(int pid);

/* ---- child servers -------------------------------------------------------------------- */
/* Start argv[0] (argv NULL-terminated) as a child that gets SIGTERM when the calling thread
 * ends (PR_SET_PDEATHSIG follows the thread, not the process), stdout to /dev/null, and
 * wait up to timeout_ms for it to listen on the Unix socket sock (removed first).  Its
 * stderr is ours with show_stderr; else what it says before it listens is kept, and when
 * it exits first (-EIO) why ends with its own words; later it goes nowhere.  0 with *pid,
 * or -errno with why set. */
int vs_spawn_server(char *const argv[], const char *sock, unsigned timeout_ms, bool show_stderr,
		    int *pid, char *why, size_t whylen);
/* Send sig to the child pid and reap it, SIGKILL after timeout_ms: its exit status (128 +
 * signal when a signal ended it), -ETIMEDOUT when it had to be killed, or -errno. */
int vs_child_stop(int pid, int sig, unsigned timeout_ms);

#endif /* VS_UTIL_H */
