/* SPDX-License-Identifier: MIT */
/*
 * Moving response and parameter data between our small buffers and the caller's
 * iovecs, bounded by the allocation length, the buffer and the data at hand.
 */
#include <stdlib.h>

#include "scsi/scsi_int.h"

void vs_scsi_data_in(struct vs_scsi_cmd *cmd, const void *buf, size_t len, size_t alloc)
{
	size_t n = len < alloc ? len : alloc;

	if (n > cmd->in_len) {
		cmd->overrun = true;
		n = cmd->in_len;
	}
	cmd->st.in_xfer = vs_iov_from_buf(cmd->in_iov, (unsigned)cmd->in_iovcnt, 0, buf, n);
}

size_t vs_scsi_data_out(struct vs_scsi_cmd *cmd, void *buf, size_t want)
{
	size_t n = want;

	if (n > cmd->out_len) {
		cmd->overrun = true;
		n = cmd->out_len;
	}
	n = vs_iov_to_buf(cmd->out_iov, (unsigned)cmd->out_iovcnt, 0, buf, n);
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
