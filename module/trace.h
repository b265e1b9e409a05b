/* SPDX-License-Identifier: GPL-2.0 */
/*
 * krdma: tracepoints (events/krdma/ in tracefs). Created in stats.c, which
 * defines CREATE_TRACE_POINTS; Kbuild adds this directory to that file's
 * include path, so that TRACE_INCLUDE_PATH works out of tree.
 *
 * Copyright (c) 2026 The krdma authors
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM krdma

#if !defined(_KRDMA_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KRDMA_TRACE_H

#include <linux/in6.h>
#include <linux/tracepoint.h>

#include "krdma.h"

/* Enum values in the format files, for tools that parse them */
TRACE_DEFINE_ENUM(IB_WC_SUCCESS);
TRACE_DEFINE_ENUM(IB_WC_LOC_LEN_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_QP_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_PROT_ERR);
TRACE_DEFINE_ENUM(IB_WC_WR_FLUSH_ERR);
TRACE_DEFINE_ENUM(IB_WC_BAD_RESP_ERR);
TRACE_DEFINE_ENUM(IB_WC_LOC_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_INV_REQ_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_ACCESS_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_OP_ERR);
TRACE_DEFINE_ENUM(IB_WC_RETRY_EXC_ERR);
TRACE_DEFINE_ENUM(IB_WC_RNR_RETRY_EXC_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_INV_RD_REQ_ERR);
TRACE_DEFINE_ENUM(IB_WC_REM_ABORT_ERR);
TRACE_DEFINE_ENUM(IB_WC_FATAL_ERR);
TRACE_DEFINE_ENUM(IB_WC_RESP_TIMEOUT_ERR);
TRACE_DEFINE_ENUM(IB_WC_GENERAL_ERR);

#define krdma_show_conn_state(state)					\
	__print_symbolic(state,						\
			 { KRDMA_CONN_CONNECTING, "CONNECTING" },	\
			 { KRDMA_CONN_CONNECTED, "CONNECTED" },		\
			 { KRDMA_CONN_ERROR, "ERROR" },			\
			 { KRDMA_CONN_CLOSED, "CLOSED" })

#define krdma_show_wc_status(status)					\
	__print_symbolic(status,					\
			 { IB_WC_SUCCESS, "SUCCESS" },			\
			 { IB_WC_LOC_LEN_ERR, "LOC_LEN_ERR" },		\
			 { IB_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR" },	\
			 { IB_WC_LOC_PROT_ERR, "LOC_PROT_ERR" },	\
			 { IB_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR" },	\
			 { IB_WC_BAD_RESP_ERR, "BAD_RESP_ERR" },	\
			 { IB_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR" },	\
			 { IB_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR" },	\
			 { IB_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR" },	\
			 { IB_WC_REM_OP_ERR, "REM_OP_ERR" },		\
			 { IB_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR" },	\
			 { IB_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR" }, \
			 { IB_WC_REM_INV_RD_REQ_ERR, "REM_INV_RD_REQ_ERR" }, \
			 { IB_WC_REM_ABORT_ERR, "REM_ABORT_ERR" },	\
			 { IB_WC_FATAL_ERR, "FATAL_ERR" },		\
			 { IB_WC_RESP_TIMEOUT_ERR, "RESP_TIMEOUT_ERR" }, \
			 { IB_WC_GENERAL_ERR, "GENERAL_ERR" })

#define krdma_show_opcode(opcode)					\
	__print_symbolic(opcode,					\
			 { KRDMA_OP_WRITE, "WRITE" },			\
			 { KRDMA_OP_WRITE_IMM, "WRITE_IMM" },		\
			 { KRDMA_OP_READ, "READ" },			\
			 { KRDMA_OP_SEND, "SEND" },			\
			 { KRDMA_OP_SEND_IMM, "SEND_IMM" },		\
			 { KRDMA_OP_RECV, "RECV" },			\
			 { KRDMA_OP_FETCH_ADD, "FETCH_ADD" },		\
			 { KRDMA_OP_CMP_SWAP, "CMP_SWAP" })

/*
 * A connection changed its public state (KRDMA_CONN_*). @peer: the
 * peer's address, saved once connected, else the one being connected
 * to; 0.0.0.0:0 when not known.
 */
TRACE_EVENT(krdma_conn_state,
	    TP_PROTO(u32 conn_id, u32 old_state, u32 new_state, int error,
		     const struct sockaddr_in6 *peer),
	    TP_ARGS(conn_id, old_state, new_state, error, peer),
	    TP_STRUCT__entry(__field(u32, conn_id)
			     __field(u32, old_state)
			     __field(u32, new_state)
			     __field(int, error)
			     __array(u8, peer, sizeof(struct sockaddr_in6))),
	    TP_fast_assign(__entry->conn_id = conn_id;
			   __entry->old_state = old_state;
			   __entry->new_state = new_state;
			   __entry->error = error;
			   memcpy(__entry->peer, peer, sizeof(*peer));),
	    TP_printk("conn=%u old=%s new=%s error=%d peer=%pISpc",
		      __entry->conn_id,
		      krdma_show_conn_state(__entry->old_state),
		      krdma_show_conn_state(__entry->new_state),
		      __entry->error, __entry->peer)
);

/* An operation completed with an error status (flushes included) */
TRACE_EVENT(krdma_op_failed,
	    TP_PROTO(u32 conn_id, u32 opcode, u32 status, u32 vendor_err),
	    TP_ARGS(conn_id, opcode, status, vendor_err),
	    TP_STRUCT__entry(__field(u32, conn_id)
			     __field(u32, opcode)
			     __field(u32, status)
			     __field(u32, vendor_err)),
	    TP_fast_assign(__entry->conn_id = conn_id;
			   __entry->opcode = opcode;
			   __entry->status = status;
			   __entry->vendor_err = vendor_err;),
	    TP_printk("conn=%u op=%s status=%s (%u) vendor_err=%#x",
		      __entry->conn_id, krdma_show_opcode(__entry->opcode),
		      krdma_show_wc_status(__entry->status), __entry->status,
		      __entry->vendor_err)
);

#endif /* _KRDMA_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
