/* The generated types of thrift/param.thrift, for both ends of the
 * parameter service (rpc_server.c, server/rpc_client.c). */
#ifndef SHOAL_RPC_TYPES_H
#define SHOAL_RPC_TYPES_H

#include "shoal_param_service.h"
#include "shoal_param_types.h"

G_BEGIN_DECLS

/* Registers every generated type of the service once (thread-safe) and
 * the thrift library's (shoal_thrift_types_init).  Generated get_type
 * functions use an unlocked static: two threads making the first object
 * of a type at once crashed about one run in three.  Every entry point of
 * the RPC code calls this before any thread can race. */
void shoal_rpc_types_init (void);

G_END_DECLS

#endif
