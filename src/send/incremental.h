/* SPDX-License-Identifier: MIT */
/* Incremental send streams (incremental.c). */
#ifndef BI_SEND_INCREMENTAL_H
#define BI_SEND_INCREMENTAL_H

#include "send/commands.h"

/* From s->parent to s->sv: the stream after its header, END included. */
int bi_send_incremental(struct bi_send *s);

#endif
