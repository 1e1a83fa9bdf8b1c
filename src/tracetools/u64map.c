/* SPDX-License-Identifier: MIT */
/*
 * A map from 64-bit keys to indices (tracetools.h), for the tools' lookups per event: a
 * capture decides how many threads, tags or queues there are, so finding one must not
 * cost a search through all of them (40,000 one-event threads made the CTF export
 * quadratic).  Open addressing with linear probing, at most half full.  Keys are never
 * removed: a key set to VS_U64MAP_NONE reads as absent.
 */
#include <errno.h>
#include <stdlib.h>

#include "tracetools/tracetools.h"

struct vs_u64map_slot {
	uint64_t key;
	size_t val;
	bool used;
};

static size_t slot_of(uint64_t key, size_t mask)
{
	key ^= key >> 33; /* a 64-bit finaliser: tags and tids may differ in a few bits */
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return (size_t)key & mask;
}

/* Where key is, or the free slot it would take (the map has one: at most half full). */
static struct vs_u64map_slot *find(const struct vs_u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1;

	for (size_t i = slot_of(key, mask);; i = (i + 1) & mask)
		if (!m->slots[i].used || m->slots[i].key == key)
			return &m->slots[i];
}

size_t vs_u64map_get(const struct vs_u64map *m, uint64_t key)
{
	const struct vs_u64map_slot *s = m->cap ? find(m, key) : NULL;

	return s && s->used ? s->val : VS_U64MAP_NONE;
}

static int grow(struct vs_u64map *m)
{
	size_t cap = m->cap ? 2 * m->cap : 64, old_cap = m->cap;
	struct vs_u64map_slot *old = m->slots;

	if (cap > SIZE_MAX / sizeof *old)
		return -ENOMEM;
	m->slots = calloc(cap, sizeof *m->slots);
	if (!m->slots) {
		m->slots = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].used)
			*find(m, old[i].key) = old[i];
	free(old);
	return 0;
}

int vs_u64map_put(struct vs_u64map *m, uint64_t key, size_t val)
{
	struct vs_u64map_slot *s = m->cap ? find(m, key) : NULL;

	if (!s || !s->used) {
		if ((m->n + 1) * 2 > m->cap) {
			if (grow(m) < 0)
				return -ENOMEM;
			s = find(m, key);
		}
		m->n++;
	}
	*s = (struct vs_u64map_slot){.key = key, .val = val, .used = true};
	return 0;
}

void vs_u64map_free(struct vs_u64map *m)
{
	free(m->slots);
	*m = (struct vs_u64map){0};
}
