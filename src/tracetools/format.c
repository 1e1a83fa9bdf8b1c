/* SPDX-License-Identifier: MIT */
/*
 * Formatting recorded events: a printf interpreter that takes its arguments from
 * raw record bytes, typed by the site's metadata, and hands each conversion to
 * snprintf with a C type that matches the conversion.  The record may come from a
 * hostile file, so every read is bounds-checked and %n is never passed on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tracetools/tracetools.h"

struct out {
	char *p;
	size_t len, cap;
};

static void emit(struct out *o, const char *s, size_t n)
{
	if (o->cap == 0)
		return;
	size_t room = o->cap - 1 - o->len;
	if (n > room)
		n = room;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void emitf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(struct out *o, const char *fmt, ...)
{
	char tmp[2 * VS_TRACE_BYTES_MAX + 4 * VS_TRACE_STR_MAX + 64]; /* the longest conversion */
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		emit(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

struct args {
	const struct vs_meta_site *site;
	const uint8_t *p;
	size_t len, off;
	unsigned idx;
};

enum { A_INT, A_UINT, A_DBL, A_PTR, A_STR, A_BYTES };
struct val {
	int kind;
	int64_t i;
	uint64_t u;
	double d;
	const char *s;
	size_t slen;
	int cut;
};

/* Next argument, or -1 when the record doesn't hold it. */
static int next_arg(struct args *a, struct val *v)
{
	if (a->idx >= a->site->nargs)
		return -1;
	uint8_t t = a->site->types[a->idx++];
	size_t size = t == VS_ARG_I32 || t == VS_ARG_U32     ? 4
		      : t == VS_ARG_STR || t == VS_ARG_BYTES ? 2
							     : 8;
	if (size > a->len - a->off)
		return -1;
	const uint8_t *p = a->p + a->off;
	a->off += size;
	memset(v, 0, sizeof *v);
	switch (t) {
	case VS_ARG_I32: {
		int32_t x;
		memcpy(&x, p, 4);
		v->kind = A_INT;
		v->i = x;
		v->u = (uint64_t)(int64_t)x;
		return 0;
	}
	case VS_ARG_U32: {
		uint32_t x;
		memcpy(&x, p, 4);
		v->kind = A_UINT;
		v->u = x;
		v->i = x;
		return 0;
	}
	case VS_ARG_I64:
	case VS_ARG_U64:
	case VS_ARG_PTR:
		memcpy(&v->u, p, 8);
		v->i = (int64_t)v->u;
		v->kind = t == VS_ARG_I64 ? A_INT : t == VS_ARG_U64 ? A_UINT : A_PTR;
		return 0;
	case VS_ARG_F64:
	case VS_ARG_LDBL:
		memcpy(&v->d, p, 8);
		v->kind = A_DBL;
		return 0;
	case VS_ARG_STR:
	case VS_ARG_BYTES: {
		uint16_t l;
		memcpy(&l, p, 2);
		v->kind = t == VS_ARG_STR ? A_STR : A_BYTES;
		if (l == VS_TRACE_STR_NULL) {
			v->s = NULL;
			return 0;
		}
		v->cut = (l & VS_TRACE_STR_CUT) != 0;
		l &= (uint16_t)~VS_TRACE_STR_CUT;
		if (l > (t == VS_ARG_STR ? VS_TRACE_STR_MAX : VS_TRACE_BYTES_MAX) ||
		    l > a->len - a->off)
			return -1;
		v->s = (const char *)a->p + a->off;
		v->slen = l;
		a->off += l;
		return 0;
	}
	}
	return -1;
}

static const struct vs_note *find_note(const struct vs_note *notes, size_t nnotes, const char *f,
				       size_t n)
{
	for (size_t i = 0; i < nnotes; i++)
		if (strlen(notes[i].name) == n - 2 && !memcmp(notes[i].name, f + 1, n - 2))
			return &notes[i];
	return NULL;
}

/* The conversion just emitted (from `mark` on) named by its note, when the note is
 * known and says something about this value; otherwise the conversion stays. */
static void apply_note(struct out *o, size_t mark, const struct vs_note *note, const struct val *v)
{
	char text[VS_NOTE_TEXT_MAX];
	size_t n = 0;
	if (!note)
		return;
	if ((v->kind == A_INT || v->kind == A_UINT) && note->int_name) {
		const char *name = note->int_name(v->u);
		if (name)
			n = (size_t)snprintf(text, sizeof text, "%s", name);
	} else if (v->kind == A_BYTES && v->s && note->bytes_text) {
		n = note->bytes_text(text, sizeof text, (const uint8_t *)v->s, v->slen);
	}
	if (!n)
		return;
	if (n >= sizeof text)
		n = sizeof text - 1;
	o->len = mark < o->len ? mark : o->len;
	if (o->cap)
		o->p[o->len] = '\0';
	emit(o, text, n);
}

int vs_format_message(char *buf, size_t buflen, const struct vs_meta_site *site,
		      const uint8_t *args, size_t len)
{
	return vs_format_message_noted(buf, buflen, site, args, len, NULL, 0);
}

int vs_format_message_noted(char *buf, size_t buflen, const struct vs_meta_site *site,
			    const uint8_t *args, size_t len, const struct vs_note *notes,
			    size_t nnotes)
{
	struct out o = {buf, 0, buflen};
	struct args a = {site, args, len, 0, 0};
	const char *f = site->fmt;
	int rc = 0;

	if (buflen)
		buf[0] = '\0';
	while (*f) {
		const char *pct = strchr(f, '%');
		if (!pct) {
			emit(&o, f, strlen(f));
			break;
		}
		emit(&o, f, (size_t)(pct - f));
		f = pct + 1;
		size_t mark = o.len; /* where this conversion's text begins */
		if (*f == '%') {
			emit(&o, "%", 1);
			f++;
			continue;
		}
		/* flags, width, precision, length, conversion */
		char spec[64] = "%";
		size_t sl = 1;
		while (*f && strchr("-+ #0'", *f) && sl < 16)
			spec[sl++] = *f++;
		struct val v = {.kind = -1}; /* the conversion's value, for its note */
		int width = -1, prec = -1;
		if (*f == '*') {
			f++;
			if (next_arg(&a, &v) < 0 || (v.kind != A_INT && v.kind != A_UINT))
				goto bad;
			/* printf: a negative width from '*' is the '-' flag and its magnitude */
			int64_t wv = (int64_t)(int32_t)v.u;
			if (wv < 0) {
				if (sl < 16)
					spec[sl++] = '-';
				wv = -wv;
			}
			width = wv > 4096 ? 4096 : (int)wv;
		} else {
			while (*f >= '0' && *f <= '9') {
				width = (width < 0 ? 0 : width) * 10 + (*f++ - '0');
				if (width > 4096)
					width = 4096;
			}
		}
		if (*f == '.') {
			f++;
			prec = 0;
			if (*f == '*') {
				f++;
				if (next_arg(&a, &v) < 0 || (v.kind != A_INT && v.kind != A_UINT))
					goto bad;
				/* a negative precision from '*' means none */
				int64_t pv = (int64_t)(int32_t)v.u;
				prec = pv < 0 ? -1 : pv > 4096 ? 4096 : (int)pv;
			} else {
				while (*f >= '0' && *f <= '9') {
					prec = prec * 10 + (*f++ - '0');
					if (prec > 4096)
						prec = 4096;
				}
			}
		}
		if (width > 4096)
			width = 4096;
		if (prec > 4096)
			prec = 4096;
		/* length modifiers decide how an integer is narrowed, as printf would */
		int bits = 32;
		if (f[0] == 'h' && f[1] == 'h') {
			bits = 8;
			f += 2;
		} else if (f[0] == 'h') {
			bits = 16;
			f++;
		} else if (f[0] == 'l' && f[1] == 'l') {
			bits = 64;
			f += 2;
		} else if (strchr("ljztqL", f[0]) && f[0]) {
			bits = 64;
			f++;
		}
		char conv = *f ? *f++ : '\0';
		if (width >= 0)
			sl += (size_t)snprintf(spec + sl, sizeof spec - sl, "%d", width);
		if (prec >= 0)
			sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ".%d", prec);
		switch (conv) {
		case 'd':
		case 'i':
		case 'u':
		case 'x':
		case 'X':
		case 'o':
		case 'c': {
			if (next_arg(&a, &v) < 0 || (v.kind != A_INT && v.kind != A_UINT))
				goto bad;
			uint64_t u = v.u;
			if (bits < 64)
				u &= (1ull << bits) - 1;
			if (conv == 'c' && (unsigned char)u == 0) {
				/* would end the message here: shown as the escape would */
				emit(&o, "\\x00", 4);
			} else if (conv == 'c') {
				snprintf(spec + sl, sizeof spec - sl, "c");
				emitf(&o, spec, (int)(unsigned char)u);
			} else if (conv == 'd' || conv == 'i') {
				int64_t s = (int64_t)u;
				if (bits < 64 && (u >> (bits - 1)) & 1)
					s = (int64_t)(u | ~((1ull << bits) - 1));
				snprintf(spec + sl, sizeof spec - sl, "ll%c", conv);
				emitf(&o, spec, (long long)s);
			} else {
				snprintf(spec + sl, sizeof spec - sl, "ll%c", conv);
				emitf(&o, spec, (unsigned long long)u);
			}
			break;
		}
		case 'f':
		case 'F':
		case 'e':
		case 'E':
		case 'g':
		case 'G':
		case 'a':
		case 'A':
			if (next_arg(&a, &v) < 0 || v.kind != A_DBL)
				goto bad;
			snprintf(spec + sl, sizeof spec - sl, "%c", conv);
			emitf(&o, spec, v.d);
			break;
		case 'p':
			if (next_arg(&a, &v) < 0)
				goto bad;
			if (v.kind == A_BYTES) {
				emit(&o, "<bytes>", 7);
				break;
			}
			if (v.kind == A_STR) {
				/* A char * is recorded as its text, not its address: cast to
				 * (void *) at the site to trace the address. */
				emitf(&o, "<char* \"%.*s\">", (int)v.slen, v.s ? v.s : "");
				break;
			}
			snprintf(spec + sl, sizeof spec - sl, "p");
			emitf(&o, spec, (void *)(uintptr_t)v.u);
			break;
		case 's': {
			if (next_arg(&a, &v) < 0 || (v.kind != A_STR && v.kind != A_BYTES))
				goto bad;
			if (v.kind == A_BYTES) {
				/* a byte array: its hex text */
				char hex[2 * VS_TRACE_BYTES_MAX + 8];
				if (v.s)
					vs_format_hex(hex, sizeof hex, (const uint8_t *)v.s, v.slen,
						      v.cut);
				else
					strcpy(hex, "(null)");
				snprintf(spec + sl, sizeof spec - sl, "s");
				emitf(&o, spec, hex);
				break;
			}
			/* Recorded strings have no NUL; one in a capture would hide what
			 * follows it, so it is shown as the text escape would show it. */
			char tmp[VS_TRACE_STR_MAX * 4 + 16];
			size_t n = v.slen < VS_TRACE_STR_MAX ? v.slen : VS_TRACE_STR_MAX, t = 0;
			if (!v.s) {
				strcpy(tmp, "(null)"); /* as glibc's printf */
				t = 6;
			}
			for (size_t i = 0; v.s && i < n; i++) {
				if (v.s[i]) {
					tmp[t++] = v.s[i];
				} else {
					memcpy(tmp + t, "\\x00", 4);
					t += 4;
				}
			}
			tmp[t] = '\0';
			if (v.cut)
				strcat(tmp, "[...]");
			snprintf(spec + sl, sizeof spec - sl, "s");
			emitf(&o, spec, tmp);
			break;
		}
		case 'n':
			/* Never interpreted, but its argument is consumed as printf would. */
			if (next_arg(&a, &v) < 0)
				goto bad;
			emit(&o, "<%n?>", 5);
			break;
		default:
			/* %m and anything unknown are shown, never interpreted. */
			emit(&o, "<%", 2);
			if (conv)
				emit(&o, &conv, 1);
			emit(&o, "?>", 2);
			break;
		}
		/* "{name}" right after a conversion: a decode-time name for its value. */
		size_t nl = vs_note_len(f);
		if (nl) {
			apply_note(&o, mark, find_note(notes, nnotes, f, nl), &v);
			f += nl;
		}
		continue;
	bad:
		emit(&o, "<bad arg>", 9);
		rc = -EINVAL;
		break;
	}
	return rc;
}

/* ---- escaping for terminals and JSON ------------------------------------------------------
 * Strings in a capture or a trace file come from the traced process, or from whoever
 * wrote the file: an escape sequence in them must not reach a terminal, a newline must
 * not forge a line, and JSON must stay JSON. */

/* Length of the well-formed UTF-8 sequence at s (1 to 4), its code point in *cp; 0 if
 * s does not start one (stray continuation byte, overlong form, surrogate, past
 * U+10FFFF, cut short). */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
	static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	size_t n = s[0] < 0x80		   ? 1
		   : (s[0] & 0xe0) == 0xc0 ? 2
		   : (s[0] & 0xf0) == 0xe0 ? 3
		   : (s[0] & 0xf8) == 0xf0 ? 4
					   : 0;
	if (n == 0)
		return 0;
	uint32_t c = n == 1 ? s[0] : s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min_cp[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/* The next character of p as a terminal should get it: the bytes themselves, or one
 * \xNN per byte (in esc) for a control character or a byte that is not UTF-8.  Sets
 * *piece and *plen to what to print; returns how many bytes of p that was. */
static size_t text_char(const unsigned char *p, char esc[17], const char **piece, size_t *plen)
{
	uint32_t cp;
	size_t n = utf8_seq(p, &cp);
	if (n && !is_control(cp)) {
		*piece = (const char *)p;
		*plen = n;
		return n;
	}
	size_t bytes = n ? n : 1; /* a C1 control is two bytes in UTF-8 */
	*plen = 0;
	for (size_t i = 0; i < bytes; i++)
		*plen += (size_t)snprintf(esc + *plen, 17 - *plen, "\\x%02x", p[i]);
	*piece = esc;
	return bytes;
}

size_t vs_escape_text(char *out, size_t outlen, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = 0;
	if (!outlen)
		return 0;
	while (*p) {
		char esc[17];
		const char *piece;
		size_t plen, n = text_char(p, esc, &piece, &plen);
		if (plen > outlen - 1 - len)
			break; /* cut before a whole character or escape */
		memcpy(out + len, piece, plen);
		len += plen;
		p += n;
	}
	out[len] = '\0';
	return len;
}

void vs_fputs_text(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		char esc[17];
		const char *piece;
		size_t plen;
		p += text_char(p, esc, &piece, &plen);
		fwrite(piece, 1, plen, f);
	}
}

void vs_fputs_json(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;
	fputc('"', f);
	while (*p) {
		uint32_t cp;
		size_t n = utf8_seq(p, &cp);
		if (n == 0) {
			fputs("\\ufffd", f); /* not UTF-8: the replacement character */
			p++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			fprintf(f, "\\%c", (char)cp);
		else if (cp == '\n')
			fputs("\\n", f);
		else if (cp == '\r')
			fputs("\\r", f);
		else if (cp == '\t')
			fputs("\\t", f);
		else if (is_control(cp))
			fprintf(f, "\\u%04x", (unsigned)cp);
		else
			fwrite(p, 1, n, f);
		p += n;
	}
	fputc('"', f);
}
