/* SPDX-License-Identifier: MIT */
/* The storage benchmark (`vioscope bench`): profiles, statistics, runners. */
#ifndef VS_BENCH_STORAGE_H
#define VS_BENCH_STORAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bench_profile {
	char name[32];
	bool random;
	uint32_t block; /* bytes */
	unsigned depth; /* requests in flight per thread */
	unsigned threads;
};
int bench_profile_parse(const char *s, struct bench_profile *p, char *why, size_t whylen);

#define BENCH_HIST_BUCKETS (64 * 40)
struct bench_hist {
	uint64_t count[BENCH_HIST_BUCKETS];
	uint64_t n, sum;
};
void bench_hist_add(struct bench_hist *h, uint64_t ns);
void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from);
double bench_hist_percentile_us(const struct bench_hist *h, double pct);
double bench_hist_mean_us(const struct bench_hist *h);

struct bench_result {
	char profile[32];
	char rw[8];
	double mib_s, iops, mean_us, p50_us, p99_us, p999_us, seconds;
	uint64_t errors;
	double idle_cpu;     /* --idle: the target's share of a CPU while idle, or -1 */
	double seconds_idle; /* how long that was */
	/* CPU time per request during the run (us, all threads), or -1: the process that
	 * drove the requests (the initiator, or fio with librbd/io_uring) and the target. */
	double cpu_us, target_cpu_us;
	bool interrupt; /* the initiator took completions by interrupt (else it polled) */
	/* Polling: the share of the run its threads spent waiting for a CPU (runnable, not
	 * running: other processes had the CPUs), or -1; starved when >= BENCH_STARVED. */
	double cpu_wait;
	bool starved;
	bool interrupted;  /* a signal cut the run short: figures over r->seconds */
	char failure[240]; /* the first failed request in words, when r->errors */
};
/* A polling initiator whose threads wait for a CPU this share of the run is starved: its
 * spinning then takes the CPU the target needs (docs/PERFORMANCE.md, "The initiator's
 * completion mode"). */
#define BENCH_STARVED 0.10
void bench_result_print_header(FILE *f);
void bench_result_print(FILE *f, const struct bench_result *r);
void bench_result_notes(FILE *f, const struct bench_result *r);
void bench_result_json(FILE *f, const struct bench_result *r);
double bench_json_number(const char *json, const char *key, double dflt);

struct bench_opts {
	const char *socket;	 /* existing target, or NULL: start one */
	const char *target_spec; /* a backend spec ("file=IMG", "ram=SIZE", "rbd=POOL/IMAGE...") */
	bool write;
	double seconds;
	bool interrupt;	      /* --interrupt: completion threads instead of polling */
	bool initiator_poll;  /* --initiator-poll: poll even where bench would not */
	bool dirty_log;	      /* --dirty-log: the target logs its writes (a migration's cost) */
	bool keep_inflight;   /* --keep-inflight: an in-flight region shared with the target */
	bool target_poll;     /* embedded target busy-polls (--poll) */
	int adaptive_poll_us; /* embedded target's --adaptive-poll, or -1: its default */
	double idle_seconds;  /* after each profile, stay connected this long, idle */
	int target_pid;	      /* the embedded target (its CPU while idle), or 0 */
	unsigned queues;
	bool json;
	bool progress;
	bool quiet;	 /* --no-progress: with --json, stderr says nothing either */
	uint64_t seed;	 /* of the random offsets (1..) */
	const char *exe; /* the vioscope binary to run the embedded target with */
};

/* Whether the initiator takes completions by interrupt for profile p, and why (a
 * phrase for the run's header). */
bool bench_initiator_interrupt(const struct bench_opts *o, const struct bench_profile *p,
			       const char **why);
/* Run one profile through the user-space initiator against opts->socket. */
int bench_run_initiator(const struct bench_opts *o, const struct bench_profile *p,
			struct bench_result *r, char *why, size_t whylen);
/* Run one profile with fio on the storage of a backend spec: io_uring on file=PATH, the
 * rbd engine on rbd=POOL/IMAGE[,conf=PATH][,id=USER]: the raw limit.  -ENOTSUP for others. */
int bench_run_fio(const char *spec, const struct bench_profile *p, bool write, double seconds,
		  struct bench_result *r, char *why, size_t whylen);

/* `bench --flavours`: profiles NULL (the seed driver's two columns) or two; an exit
 * status. */
int bench_flavours(struct bench_opts *o, char **profiles, int rounds, const char *svg);

/* Start `exe target --socket SOCK --lun 0:SPEC ...` (o: --poll, --adaptive-poll) and wait
 * for its socket. */
int bench_target_start(const char *exe, const char *spec, unsigned queues,
		       const struct bench_opts *o, const char *sock, int *pid, char *why,
		       size_t whylen);
/* CPU time the process pid has used so far, all threads (ns, /proc/PID/task/x/schedstat). */
int bench_proc_cpu_ns(int pid, uint64_t *ns);
int bench_target_stop(int pid);
/* The image of a run without --target or --socket: its spec ("file=PATH"), and in made[]
 * the path of a file of this run's own that the caller removes when it ends ("" when the
 * image is the user's VIOSCOPE_BENCH_IMAGE).  0, or -errno with why (-EINTR: interrupted). */
int bench_default_image(char *spec, size_t len, char *made, size_t madelen, char *why,
			size_t whylen);

#endif
