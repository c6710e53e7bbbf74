/* Registering the Thrift types once, and mending two leaks of c_glib
 * 0.17's processor classes on the way; see thrift_types.h. */
#include "rpc/thrift_types.h"

#include <thrift/c_glib/thrift.h>
#include <thrift/c_glib/thrift_application_exception.h>
#include <thrift/c_glib/thrift_configuration.h>
#include <thrift/c_glib/thrift_struct.h>
#include <thrift/c_glib/processor/thrift_dispatch_processor.h>
#include <thrift/c_glib/protocol/thrift_binary_protocol.h>

#include "rpc/thrift_protocol.h"
#include "rpc/thrift_socket.h"

/* ThriftApplicationException's finalize (c_glib 0.17) frees its message
 * and does not chain up, so every exception object leaks its instance:
 * one per call of an unknown method on the server (the reply is such an
 * exception), found by fuzz/fuzz_param_handler.c.  The class's finalize
 * is replaced by one that chains up; the class stays referenced. */
static void (*app_exception_finalize) (GObject *object);

static void
app_exception_finalize_chained (GObject *object)
{
  app_exception_finalize (object);
  G_OBJECT_CLASS (g_type_class_peek (THRIFT_TYPE_STRUCT))->finalize (object);
}

/* ThriftDispatchProcessor's answer to a call of an unknown method (c_glib
 * 0.17) returns without freeing the method name when the call's
 * arguments do not parse: a peer could grow a server's memory with
 * garbage, before any token check (found by fuzz/fuzz_param_handler.c).
 * This one does the same (skip the arguments, reply UNKNOWN_METHOD) and
 * frees the name on every path. */
static gboolean
unknown_method (ThriftDispatchProcessor *self, ThriftProtocol *in, ThriftProtocol *out,
                gchar *fname, gint32 seqid, GError **error)
{
  gboolean ok;

  (void) self;
  ok = thrift_protocol_skip (in, T_STRUCT, error) >= 0
       && thrift_protocol_read_message_end (in, error) >= 0
       && thrift_transport_read_end (in->transport, error) >= 0;
  if (ok)
    {
      char *message = g_strdup_printf ("Invalid method name: '%s'", fname);
      ThriftApplicationException *x = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, "type",
                                                    THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD,
                                                    "message", message, NULL);
      ok = thrift_protocol_write_message_begin (out, fname, T_EXCEPTION, seqid, error) >= 0
           && thrift_struct_write (THRIFT_STRUCT (x), out, error) >= 0
           && thrift_protocol_write_message_end (out, error) >= 0
           && thrift_transport_write_end (out->transport, error) >= 0
           && thrift_transport_flush (out->transport, error) >= 0;
      g_object_unref (x);
      g_free (message);
    }
  g_free (fname);
  return ok;
}

/* ThriftDispatchProcessor's process (c_glib 0.17) leaks the method name
 * of a message that is neither a call nor a oneway (a peer sending a
 * reply to a server; found by fuzz/fuzz_param_handler.c) and says why only
 * in a warning.  This one frees it and fails with the reason. */
static gboolean
dispatch_process (ThriftProcessor *processor, ThriftProtocol *in, ThriftProtocol *out,
                  GError **error)
{
  gchar *fname = NULL;
  ThriftMessageType type;
  gint32 seqid;

  if (thrift_protocol_read_message_begin (in, &fname, &type, &seqid, error) < 0)
    return FALSE;
  if (type != T_CALL && type != T_ONEWAY)
    {
      g_set_error (error, THRIFT_PROTOCOL_ERROR, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
                   "a message of type %d where a call was expected", (int) type);
      g_free (fname);
      return FALSE;
    }
  return THRIFT_DISPATCH_PROCESSOR_GET_CLASS (processor)->dispatch_call (
    THRIFT_DISPATCH_PROCESSOR (processor), in, out, fname, seqid, error);
}

void
shoal_thrift_types_init (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      g_type_ensure (THRIFT_TYPE_TRANSPORT);
      g_type_ensure (THRIFT_TYPE_PROTOCOL);
      g_type_ensure (THRIFT_TYPE_BINARY_PROTOCOL);
      g_type_ensure (THRIFT_TYPE_STRUCT);
      GObjectClass *exception_class = g_type_class_ref (THRIFT_TYPE_APPLICATION_EXCEPTION);
      app_exception_finalize = exception_class->finalize;
      exception_class->finalize = app_exception_finalize_chained;
      g_type_ensure (THRIFT_TYPE_PROCESSOR);
      ThriftDispatchProcessorClass *dispatch_class = g_type_class_ref (THRIFT_TYPE_DISPATCH_PROCESSOR);
      dispatch_class->dispatch_call = unknown_method;
      /* before any subclass's class exists: they copy these pointers */
      dispatch_class->process = dispatch_process;
      THRIFT_PROCESSOR_CLASS (dispatch_class)->process = dispatch_process;
      g_type_ensure (THRIFT_TYPE_CONFIGURATION);
      g_type_ensure (shoal_thrift_socket_get_type ());
      g_type_ensure (shoal_thrift_protocol_get_type ());
      g_once_init_leave (&done, 1);
    }
}
