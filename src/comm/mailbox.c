/* Queues of GBytes under one lock and one condition variable: the
 * messages of a step are few and large, so a shared wake-up costs
 * nothing next to their copies. */
#include "comm/mailbox.h"

#include "core/error.h"

struct _ShoalMailbox {
  GMutex lock;
  GCond cond;
  GHashTable *queues;   /* guint64 key -> GQueue of GBytes */
  char *closed;         /* why, once closed */
};

static guint64
key_of (int group, guint32 channel)
{
  return ((guint64) (guint32) group << 32) | channel;
}

static void
queue_free (gpointer q)
{
  g_queue_free_full (q, (GDestroyNotify) g_bytes_unref);
}

ShoalMailbox *
shoal_mailbox_new (void)
{
  ShoalMailbox *mb = g_new0 (ShoalMailbox, 1);
  g_mutex_init (&mb->lock);
  g_cond_init (&mb->cond);
  mb->queues = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, queue_free);
  return mb;
}

void
shoal_mailbox_free (ShoalMailbox *mb)
{
  if (mb == NULL)
    return;
  g_hash_table_destroy (mb->queues);
  g_free (mb->closed);
  g_mutex_clear (&mb->lock);
  g_cond_clear (&mb->cond);
  g_free (mb);
}

static GQueue *
queue_of (ShoalMailbox *mb, int group, guint32 channel)
{
  guint64 key = key_of (group, channel);
  GQueue *q = g_hash_table_lookup (mb->queues, &key);
  if (q == NULL)
    {
      q = g_queue_new ();
      g_hash_table_insert (mb->queues, g_memdup2 (&key, sizeof key), q);
    }
  return q;
}

void
shoal_mailbox_put (ShoalMailbox *mb, int group, guint32 channel, GBytes *msg)
{
  g_mutex_lock (&mb->lock);
  if (mb->closed == NULL)
    {
      g_queue_push_tail (queue_of (mb, group, channel), msg);
      g_cond_broadcast (&mb->cond);
      msg = NULL;
    }
  g_mutex_unlock (&mb->lock);
  if (msg != NULL)
    g_bytes_unref (msg);
}

GBytes *
shoal_mailbox_take (ShoalMailbox *mb, int group, guint32 channel, gint64 timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * 1000;
  GBytes *msg = NULL;
  g_mutex_lock (&mb->lock);
  GQueue *q = queue_of (mb, group, channel);
  while (mb->closed == NULL && (msg = g_queue_pop_head (q)) == NULL)
    if (!g_cond_wait_until (&mb->cond, &mb->lock, deadline))
      {
        msg = g_queue_pop_head (q);
        break;
      }
  if (msg == NULL)
    {
      if (mb->closed != NULL)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "group %d channel %u: %s", group, channel,
                     mb->closed);
      else
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT,
                     "group %d channel %u: no message from the other processes of the group in %.0f s",
                     group, channel, (double) timeout_ms / 1000);
    }
  g_mutex_unlock (&mb->lock);
  return msg;
}

void
shoal_mailbox_close (ShoalMailbox *mb, const char *why)
{
  g_mutex_lock (&mb->lock);
  if (mb->closed == NULL)
    mb->closed = g_strdup (why);
  g_cond_broadcast (&mb->cond);
  g_mutex_unlock (&mb->lock);
}

guint
shoal_mailbox_pending (ShoalMailbox *mb)
{
  guint n = 0;
  g_mutex_lock (&mb->lock);
  GHashTableIter it;
  gpointer q;
  g_hash_table_iter_init (&it, mb->queues);
  while (g_hash_table_iter_next (&it, NULL, &q))
    n += g_queue_get_length (q);
  g_mutex_unlock (&mb->lock);
  return n;
}

void
shoal_mailbox_sink (gpointer mailbox, int group, guint32 channel, GBytes *msg)
{
  shoal_mailbox_put (mailbox, group, channel, msg);
}
