/* SPDX-License-Identifier: MIT */
/*
 * The library of the example: provider "kv" with its own flags.  Its build links
 * vioscope::trace-all (pkg-config: vioscope-trace-all), so its _HP sites are
 * compiled in; the program that uses it is built in another flavour.
 */
#define VS_TRACE_FLAGS(X) X(PUT) X(GET) X(DEL) X(MEMORY)
#include <vioscope/trace.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore.h"

#define MAX_VALUE 4096

struct entry {
	struct entry *next;
	char *key;
	size_t len;
	unsigned char val[];
};

struct kv {
	unsigned buckets;
	struct entry **table;
};

static unsigned hash(const char *key, unsigned buckets)
{
	uint32_t h = 2166136261u;
	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % buckets;
}

struct kv *kv_open(unsigned buckets)
{
	struct kv *kv = calloc(1, sizeof *kv);
	if (kv)
		kv->table = calloc(buckets ? buckets : 1, sizeof *kv->table);
	if (!kv || !kv->table) {
		VS_ERROR(MEMORY, "open: no memory for %u buckets", buckets);
		free(kv);
		return NULL;
	}
	kv->buckets = buckets ? buckets : 1;
	VS_INFO(MEMORY, "open: %u buckets", kv->buckets);
	return kv;
}

void kv_close(struct kv *kv)
{
	unsigned n = 0;
	for (unsigned b = 0; kv && b < kv->buckets; b++) {
		for (struct entry *e = kv->table[b], *next; e; e = next, n++) {
			next = e->next;
			free(e->key);
			free(e);
		}
	}
	VS_INFO(MEMORY, "close: %u entries freed", n);
	if (kv)
		free(kv->table);
	free(kv);
}

static struct entry **find(struct kv *kv, const char *key)
{
	struct entry **p = &kv->table[hash(key, kv->buckets)];
	while (*p && strcmp((*p)->key, key) != 0)
		p = &(*p)->next;
	return p;
}

int kv_put(struct kv *kv, const char *key, const void *val, size_t len)
{
	if (!*key || len > MAX_VALUE) {
		VS_WARNING(PUT,
			   "put '%s': refused (%zu bytes; keys are not empty, values at most "
			   "%d bytes)",
			   key, len, MAX_VALUE);
		return -EINVAL;
	}
	struct entry **p = find(kv, key), *e = malloc(sizeof *e + len);
	if (!e || !(e->key = strdup(key))) {
		VS_ERROR(MEMORY, "put '%s': no memory for %zu bytes", key, len);
		free(e);
		return -ENOMEM;
	}
	memcpy(e->val, val, len);
	e->len = len;
	e->next = *p ? (*p)->next : NULL;
	if (*p) {
		free((*p)->key);
		free(*p);
	}
	*p = e;
	/* the value's first bytes, as hex */
	VS_VERBOSE_HP(PUT, "put '%s': %zu bytes %s", key, len, VS_BYTES(val, len < 8 ? len : 8));
	return 0;
}

int kv_get(struct kv *kv, const char *key, void *buf, size_t cap, size_t *len)
{
	struct entry *e = *find(kv, key);
	if (!e) {
		VS_INFO(GET, "get '%s': no such key", key);
		return -ENOENT;
	}
	memcpy(buf, e->val, e->len < cap ? e->len : cap);
	*len = e->len;
	VS_VERBOSE_HP(GET, "get '%s': %zu bytes", key, e->len);
	return 0;
}

int kv_del(struct kv *kv, const char *key)
{
	struct entry **p = find(kv, key), *e = *p;
	if (!e) {
		VS_INFO(DEL, "del '%s': no such key", key);
		return -ENOENT;
	}
	*p = e->next;
	free(e->key);
	free(e);
	VS_VERBOSE_HP(DEL, "del '%s'", key);
	return 0;
}
