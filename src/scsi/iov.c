/* SPDX-License-Identifier: MIT */
/*
 * Moving response and parameter data between our small buffers and the caller's
 * iovecs, bounded by the allocation length, the buffer and the data at hand.
 */
#include <stdlib.h>

#include "scsi/scsi_int.h"

/* Copy between a flat buffer and the iovecs' bytes from `off` on, either way. */
static size_t iov_copy(const struct iovec *iov, int cnt, size_t off, uint8_t *buf, size_t len,
		       bool to_iov)
{
	size_t done = 0;

	for (int i = 0; i < cnt && done < len; i++) {
		size_t n = iov[i].iov_len;

		if (off >= n) {
			off -= n;
			continue;
		}
		n -= off;
		if (n > len - done)
			n = len - done;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, buf + done, n);
		else
			memcpy(buf + done, (const uint8_t *)iov[i].iov_base + off, n);
		done += n;
		off = 0;
	}
	return done;
}

size_t vs_scsi_copy_to_iov(const struct iovec *iov, int cnt, size_t off, const void *src,
			   size_t len)
{
	return iov_copy(iov, cnt, off, (uint8_t *)(uintptr_t)src, len, true);
}

size_t vs_scsi_copy_from_iov(void *dst, const struct iovec *iov, int cnt, size_t off, size_t len)
{
	return iov_copy(iov, cnt, off, dst, len, false);
}

void vs_scsi_data_in(struct vs_scsi_cmd *cmd, const void *buf, size_t len, size_t alloc)
{
	size_t n = len < alloc ? len : alloc;

	if (n > cmd->in_len) {
		cmd->overrun = true;
		n = cmd->in_len;
	}
	cmd->st.in_xfer = vs_scsi_copy_to_iov(cmd->in_iov, cmd->in_iovcnt, 0, buf, n);
}

size_t vs_scsi_data_out(struct vs_scsi_cmd *cmd, void *buf, size_t want)
{
	size_t n = want;

	if (n > cmd->out_len) {
		cmd->overrun = true;
		n = cmd->out_len;
	}
	n = vs_scsi_copy_from_iov(buf, cmd->out_iov, cmd->out_iovcnt, 0, n);
	if (n > cmd->st.out_xfer)
		cmd->st.out_xfer = n;
	return n;
}

void *vs_scsi_alloc_io_buf(const struct vs_scsi_lun *lun, size_t len)
{
	size_t align = vs_backend_alignment(lun->be);
	void *p = NULL;

	/* Page-aligned at least, so O_DIRECT backends take it without bouncing. */
	if (align < 4096)
		align = 4096;
	if (posix_memalign(&p, align, len ? len : 1))
		return NULL;
	return p;
}
