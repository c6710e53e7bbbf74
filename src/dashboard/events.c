/* Every call here runs on the dashboard's one thread (the server's
 * context), so the clients need no lock. */
#include "dashboard/events.h"

#include <string.h>

#define POLL_MS 500
#define SCAN_MS 2000
/* a comment line this often: a page that went away is noticed when the
 * write fails, and proxies keep the stream open */
#define KEEPALIVE_MS 15000
#define CLIENT_QUEUE_MAX (8u << 20)

typedef struct {
  guint next;          /* lines the page has */
  guint generation;    /* of the file those lines are from; NOT_SEEN: the run was not there yet */
} Watched;

#define NOT_SEEN G_MAXUINT

typedef struct {
  ShoalEventFeed *feed;
  SoupServerMessage *msg;
  GHashTable *watched;   /* run id -> Watched */
  gsize queued;          /* bytes appended, not yet written */
  gboolean closing;
} Client;

struct _ShoalEventFeed {
  ShoalRuns *runs;
  GMainContext *context;
  GList *clients;
  GSource *poll;
  gint64 last_scan_us, last_keepalive_us;
};

ShoalEventFeed *
shoal_event_feed_new (ShoalRuns *runs, GMainContext *context)
{
  ShoalEventFeed *f = g_new0 (ShoalEventFeed, 1);
  f->runs = runs;
  f->context = context;
  return f;
}

static void
client_free (Client *c)
{
  g_hash_table_unref (c->watched);
  g_object_unref (c->msg);
  g_free (c);
}

static void
stop_polling_if_idle (ShoalEventFeed *f)
{
  if (f->clients == NULL && f->poll != NULL)
    {
      g_source_destroy (f->poll);
      g_source_unref (f->poll);
      f->poll = NULL;
    }
}

void
shoal_event_feed_free (ShoalEventFeed *f)
{
  if (f == NULL)
    return;
  for (GList *l = f->clients; l != NULL; l = l->next)
    {
      Client *c = l->data;
      g_signal_handlers_disconnect_by_data (c->msg, c);
      client_free (c);
    }
  g_list_free (f->clients);
  f->clients = NULL;
  stop_polling_if_idle (f);
  g_free (f);
}

guint
shoal_event_feed_clients (const ShoalEventFeed *f)
{
  return g_list_length (f->clients);
}

static void
on_finished (SoupServerMessage *msg, gpointer data)
{
  Client *c = data;
  ShoalEventFeed *f = c->feed;
  g_signal_handlers_disconnect_by_data (msg, c);
  f->clients = g_list_remove (f->clients, c);
  client_free (c);
  stop_polling_if_idle (f);
}

static void
on_wrote (SoupServerMessage *msg, guint size, gpointer data)
{
  (void) msg;
  Client *c = data;
  c->queued -= MIN (c->queued, (gsize) size);
}

/* Queues text on the stream; a page too far behind is cut off. */
static void
send_text (Client *c, const char *text, gsize len)
{
  if (c->closing)
    return;
  if (c->queued + len > CLIENT_QUEUE_MAX)
    {
      /* shutting the socket down makes the write fail: "finished" then frees the client */
      c->closing = TRUE;
      GSocket *socket = soup_server_message_get_socket (c->msg);
      if (socket != NULL)
        g_socket_shutdown (socket, TRUE, TRUE, NULL);
      soup_server_message_unpause (c->msg);
      return;
    }
  c->queued += len;
  soup_message_body_append (soup_server_message_get_response_body (c->msg), SOUP_MEMORY_COPY, text, len);
  soup_server_message_unpause (c->msg);
}

static void
json_string (GString *s, const char *text)
{
  JsonNode *node = json_node_init_string (json_node_alloc (), text);
  char *quoted = json_to_string (node, FALSE);
  g_string_append (s, quoted);
  g_free (quoted);
  json_node_unref (node);
}

/* What is new for the page in run r. */
static void
send_run (Client *c, ShoalRun *r)
{
  Watched *w = g_hash_table_lookup (c->watched, r->id);
  if (w == NULL)
    return;
  ShoalTail *t = r->metrics;
  GString *s = g_string_new (NULL);
  if (w->generation == NOT_SEEN)
    w->generation = shoal_tail_generation (t);   /* a run that came after the page: all its lines */
  else if (shoal_tail_generation (t) != w->generation)
    {
      w->generation = shoal_tail_generation (t);
      w->next = 0;
      g_string_append (s, "event: reset\ndata: {\"run\":");
      json_string (s, r->id);
      g_string_append_printf (s, ",\"generation\":%u}\n\n", w->generation);
    }
  guint lines = shoal_tail_lines (t);
  if (lines > w->next)
    {
      g_string_append (s, "event: lines\ndata: {\"run\":");
      json_string (s, r->id);
      g_string_append_printf (s, ",\"generation\":%u,\"from\":%u,\"next\":%u,\"damaged\":%u,\"lines\":[",
                              w->generation, w->next, lines, shoal_tail_damaged (t));
      shoal_tail_append_json (t, w->next, lines, s);
      g_string_append (s, "]}\n\n");
      w->next = lines;
    }
  if (s->len > 0)
    send_text (c, s->str, s->len);
  g_string_free (s, TRUE);
}

static gboolean
on_poll (gpointer data)
{
  ShoalEventFeed *f = data;
  gint64 now = g_get_monotonic_time ();
  gboolean runs_changed = FALSE;
  if (now - f->last_scan_us >= SCAN_MS * 1000)
    {
      runs_changed = shoal_runs_scan (f->runs);
      f->last_scan_us = now;
    }
  shoal_runs_poll (f->runs);
  gboolean keepalive = now - f->last_keepalive_us >= KEEPALIVE_MS * 1000;
  if (keepalive)
    f->last_keepalive_us = now;
  /* a copy: sending may cut a client off, and "finished" may come at once */
  GList *clients = g_list_copy (f->clients);
  for (GList *l = clients; l != NULL; l = l->next)
    {
      if (g_list_find (f->clients, l->data) == NULL)
        continue;
      Client *c = l->data;
      if (runs_changed)
        send_text (c, "event: runs\ndata: {}\n\n", 21);
      for (guint i = 0; i < shoal_runs_count (f->runs); i++)
        send_run (c, shoal_runs_get (f->runs, i));
      if (keepalive)
        send_text (c, ": keepalive\n\n", 13);
    }
  g_list_free (clients);
  return G_SOURCE_CONTINUE;
}

void
shoal_event_feed_add (ShoalEventFeed *f, SoupServerMessage *msg, JsonObject *watch)
{
  Client *c = g_new0 (Client, 1);
  c->feed = f;
  c->msg = g_object_ref (msg);
  c->watched = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GList *ids = watch != NULL ? json_object_get_members (watch) : NULL;
  for (GList *l = ids; l != NULL; l = l->next)
    {
      guint status;
      const char *why;
      ShoalRun *r = shoal_runs_find (f->runs, l->data, &status, &why);
      JsonNode *n = json_object_get_member (watch, l->data);
      /* a run not there yet (a job starting) is watched for: its name must be one a run can have */
      if ((r == NULL && status != 404) || !JSON_NODE_HOLDS_VALUE (n)
          || json_node_get_value_type (n) != G_TYPE_INT64)
        continue;
      Watched *w = g_new0 (Watched, 1);
      gint64 next = json_node_get_int (n);
      /* the page's lines are of the file as it is now (it just read them) */
      w->next = r != NULL ? (guint) CLAMP (next, 0, (gint64) G_MAXUINT - 1) : 0;
      w->generation = r != NULL ? shoal_tail_generation (r->metrics) : NOT_SEEN;
      g_hash_table_insert (c->watched, g_strdup (l->data), w);
    }
  g_list_free (ids);

  SoupMessageHeaders *h = soup_server_message_get_response_headers (msg);
  soup_message_headers_set_encoding (h, SOUP_ENCODING_CHUNKED);
  soup_message_headers_set_content_type (h, "text/event-stream", NULL);
  soup_message_headers_replace (h, "Cache-Control", "no-store");
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  g_signal_connect (msg, "finished", G_CALLBACK (on_finished), c);
  g_signal_connect (msg, "wrote-body-data", G_CALLBACK (on_wrote), c);
  f->clients = g_list_prepend (f->clients, c);
  if (f->poll == NULL)
    {
      f->poll = g_timeout_source_new (POLL_MS);
      g_source_set_callback (f->poll, on_poll, f, NULL);
      g_source_attach (f->poll, f->context);
    }
  /* the browser retries a dropped stream after this long */
  const char *hello = "retry: 2000\n: shoal dashboard\n\n";
  c->queued += strlen (hello);
  soup_message_body_append (soup_server_message_get_response_body (msg), SOUP_MEMORY_STATIC, hello, strlen (hello));
  /* what came since the page read its lines */
  shoal_runs_poll (f->runs);
  for (guint i = 0; i < shoal_runs_count (f->runs); i++)
    send_run (c, shoal_runs_get (f->runs, i));
}
