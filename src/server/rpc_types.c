/* One place that knows every type thrift/param.thrift generates; a type
 * added to the IDL is added here (rpc_types.h says why;
 * test/e2e/rpc_types_listed.sh fails on one left out). */
#include "server/rpc_types.h"

#include "rpc/thrift_types.h"

void
shoal_rpc_types_init (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      shoal_thrift_types_init ();
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_IF);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_CLIENT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_HANDLER);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PROCESSOR);
      g_type_ensure (SHOAL_TYPE_PARAM_ERROR);
      g_type_ensure (SHOAL_TYPE_SLICE_VALUES);
      g_type_ensure (SHOAL_TYPE_STATS_REPLY);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PULL_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PULL_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_PULL_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_PULL_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUT_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUT_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_APPLY_DELTA_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_APPLY_DELTA_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_STATS_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_STATS_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_SHUTDOWN_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_SHUTDOWN_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_CHECKPOINT_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_CHECKPOINT_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_SEND_BRIDGE_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_SEND_BRIDGE_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_STOP_AT_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_STOP_AT_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_ATTACH_SHM_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_ATTACH_SHM_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_PULL_SHM_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_PUSH_PULL_SHM_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_HEARTBEAT_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_HEARTBEAT_RESULT);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_ELASTIC_EXCHANGE_ARGS);
      g_type_ensure (SHOAL_TYPE_PARAM_SERVICE_ELASTIC_EXCHANGE_RESULT);
      g_once_init_leave (&done, 1);
    }
}
