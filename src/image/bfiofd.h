/* SPDX-License-Identifier: MIT */
/*
 * A libbfio handle that reads a file through a descriptor opened here
 * (bi_ctr_open_regular, container.h), for the libyal libraries' *_open_
 * file_io_handle: the file checked is the file read, with no second open
 * by name in between (a name swapped for a FIFO after the check).
 */
#ifndef BI_BFIOFD_H
#define BI_BFIOFD_H

#include <libbfio.h>

/* A handle reading @fd (duplicated: the caller keeps its own). Owned by
 * the caller: libbfio_handle_free, after the library using it is closed.
 * 0 or a negative errno. */
int bi_bfio_fd(libbfio_handle_t **out, int fd);

#endif
