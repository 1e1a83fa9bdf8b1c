/* SPDX-License-Identifier: MIT */
/* A small in-memory key-value store: the traced library of the example. */
#ifndef KVSTORE_H
#define KVSTORE_H

#include <stddef.h>

struct kv;

/* A store with `buckets` hash buckets; NULL when out of memory. */
struct kv *kv_open(unsigned buckets);
void kv_close(struct kv *kv);
/* 0, or -ENOMEM, -EINVAL (empty key, value over 4 KiB). */
int kv_put(struct kv *kv, const char *key, const void *val, size_t len);
/* 0 with the value in buf (cut to cap) and its length in *len, or -ENOENT. */
int kv_get(struct kv *kv, const char *key, void *buf, size_t cap, size_t *len);
/* 0 or -ENOENT. */
int kv_del(struct kv *kv, const char *key);

#endif
