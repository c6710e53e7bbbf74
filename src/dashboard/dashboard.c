/* The server: where it listens, who may ask, and the answers.
 *
 *   GET /                         the page (web/index.html)
 *   GET /app.js /app.css          its script and style (web/)
 *   GET /chart.js                 Chart.js, from Debian's libjs-chart.js
 *   GET /api/runs                 the served folders, their runs and compare folders
 *   GET /api/metrics?run=ID&from=N  a run's valid metrics lines from line N
 *   GET /api/report?compare=ID    a compare folder's report.md (404 until it is written)
 *   GET /api/results?compare=ID   its results.csv
 *   GET /api/events?watch=JSON    the live feed (dashboard/events.h)
 *
 * Only GET and HEAD; every answer is made from memory or from a file
 * named by a run found under the folders (never from the request's
 * path).  Everything runs on one thread: the answers are quick, and a
 * slow client costs a buffer, not a thread. */
#include "dashboard/dashboard.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "dashboard/events.h"
#include "dashboard/runs.h"

#ifndef SHOAL_DASHBOARD_DIR
#define SHOAL_DASHBOARD_DIR "/usr/local/share/shoal/dashboard"
#endif
#ifndef SHOAL_CHARTJS
#define SHOAL_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"
#endif
/* a report or results file larger than this is not a compare's */
#define REPORT_MAX (4 << 20)
/* connections waiting to be taken (the kernel caps it at somaxconn) */
#define LISTEN_BACKLOG 1024

typedef struct {
  const char *path;          /* as asked for */
  const char *file;          /* in the page's folder; NULL: Chart.js */
  const char *content_type;
  GBytes *bytes;
} Asset;

struct _ShoalDashboard {
  SoupServer *server;
  GMainContext *context;
  GMainLoop *loop;
  GThread *thread;
  ShoalRuns *runs;
  ShoalEventFeed *feed;
  char *token;
  char *url;
  gboolean loopback;
  Asset assets[4];
};

static const Asset asset_table[] = {
  { "/", "index.html", "text/html; charset=utf-8", NULL },
  { "/app.js", "app.js", "text/javascript; charset=utf-8", NULL },
  { "/app.css", "app.css", "text/css; charset=utf-8", NULL },
  { "/chart.js", NULL, "text/javascript; charset=utf-8", NULL },
};

/* The page's folder: $SHOAL_DASHBOARD_DIR, else a build tree's (beside
 * the binary: BUILD/dashboard), else the installed one. */
static char *
assets_dir (void)
{
  const char *env = g_getenv ("SHOAL_DASHBOARD_DIR");
  if (env != NULL && env[0] != '\0')
    return g_strdup (env);
  char *exe = g_file_read_link ("/proc/self/exe", NULL);
  if (exe != NULL)
    {
      char *bin = g_path_get_dirname (exe);
      char *beside = g_build_filename (bin, "dashboard", "index.html", NULL);
      gboolean there = g_file_test (beside, G_FILE_TEST_IS_REGULAR);
      g_free (beside);
      char *dir = there ? g_build_filename (bin, "dashboard", NULL) : NULL;
      g_free (bin);
      g_free (exe);
      if (dir != NULL)
        return dir;
    }
  return g_strdup (SHOAL_DASHBOARD_DIR);
}

static gboolean
load_assets (ShoalDashboard *d, GError **error)
{
  char *dir = assets_dir ();
  const char *chartjs = g_getenv ("SHOAL_CHARTJS");
  if (chartjs == NULL || chartjs[0] == '\0')
    chartjs = SHOAL_CHARTJS;
  gboolean ok = TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS (asset_table) && ok; i++)
    {
      d->assets[i] = asset_table[i];
      char *path = asset_table[i].file != NULL ? g_build_filename (dir, asset_table[i].file, NULL) : g_strdup (chartjs);
      char *text = NULL;
      gsize len = 0;
      GError *e = NULL;
      if (g_file_get_contents (path, &text, &len, &e))
        d->assets[i].bytes = g_bytes_new_take (text, len);
      else
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s%s", e->message,
                       asset_table[i].file != NULL
                         ? " (the dashboard's page: make install puts it there; SHOAL_DASHBOARD_DIR says where else)"
                         : " (Chart.js: Debian package libjs-chart.js, installed by make deps)");
          g_error_free (e);
          ok = FALSE;
        }
      g_free (path);
    }
  g_free (dir);
  return ok;
}

/* ---- answers -------------------------------------------------------------- */

static void
common_headers (SoupServerMessage *msg)
{
  SoupMessageHeaders *h = soup_server_message_get_response_headers (msg);
  soup_message_headers_replace (h, "X-Content-Type-Options", "nosniff");
  soup_message_headers_replace (h, "Referrer-Policy", "no-referrer");
  soup_message_headers_replace (h, "Cache-Control", "no-store");
}

static void
answer_text (SoupServerMessage *msg, guint status, const char *type, const char *text, gsize len)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, type, SOUP_MEMORY_COPY, text, len);
}

/* An error: its status and a JSON body saying why. */
static void
answer_error (SoupServerMessage *msg, guint status, const char *why)
{
  JsonBuilder *b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "error");
  json_builder_add_string_value (b, why);
  json_builder_end_object (b);
  JsonNode *root = json_builder_get_root (b);
  char *text = json_to_string (root, FALSE);
  answer_text (msg, status, "application/json", text, strlen (text));
  g_free (text);
  json_node_unref (root);
  g_object_unref (b);
}

static void
answer_json (SoupServerMessage *msg, JsonBuilder *b)
{
  JsonNode *root = json_builder_get_root (b);
  char *text = json_to_string (root, FALSE);
  answer_text (msg, SOUP_STATUS_OK, "application/json", text, strlen (text));
  g_free (text);
  json_node_unref (root);
}

static void
api_runs (ShoalDashboard *d, SoupServerMessage *msg)
{
  shoal_runs_scan (d->runs);
  shoal_runs_poll (d->runs);
  JsonBuilder *b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "roots");
  json_builder_begin_array (b);
  for (guint i = 0; i < shoal_runs_root_count (d->runs); i++)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, shoal_runs_root_name (d->runs, i));
      json_builder_set_member_name (b, "dir");
      json_builder_add_string_value (b, shoal_runs_root_dir (d->runs, i));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "runs");
  json_builder_begin_array (b);
  for (guint i = 0; i < shoal_runs_count (d->runs); i++)
    {
      ShoalRun *r = shoal_runs_get (d->runs, i);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "id");
      json_builder_add_string_value (b, r->id);
      json_builder_set_member_name (b, "compare");
      if (r->compare != NULL)
        json_builder_add_string_value (b, r->compare);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "lines");
      json_builder_add_int_value (b, shoal_tail_lines (r->metrics));
      json_builder_set_member_name (b, "damaged");
      json_builder_add_int_value (b, shoal_tail_damaged (r->metrics));
      json_builder_set_member_name (b, "generation");
      json_builder_add_int_value (b, shoal_tail_generation (r->metrics));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "compares");
  json_builder_begin_array (b);
  for (guint i = 0; i < shoal_runs_compare_count (d->runs); i++)
    {
      ShoalCompareDir *c = shoal_runs_compare_get (d->runs, i);
      char *report = g_build_filename (c->dir, "report.md", NULL);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "id");
      json_builder_add_string_value (b, c->id);
      json_builder_set_member_name (b, "report");
      json_builder_add_boolean_value (b, g_file_test (report, G_FILE_TEST_IS_REGULAR));
      json_builder_end_object (b);
      g_free (report);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  answer_json (msg, b);
  g_object_unref (b);
}

static void
api_metrics (ShoalDashboard *d, SoupServerMessage *msg, GHashTable *query)
{
  const char *id = query != NULL ? g_hash_table_lookup (query, "run") : NULL;
  const char *from_arg = query != NULL ? g_hash_table_lookup (query, "from") : NULL;
  guint status;
  const char *why;
  ShoalRun *r = shoal_runs_find (d->runs, id, &status, &why);
  if (r == NULL)
    {
      answer_error (msg, status, why);
      return;
    }
  guint64 from = 0;
  if (from_arg != NULL && !g_ascii_string_to_unsigned (from_arg, 10, 0, G_MAXUINT, &from, NULL))
    {
      answer_error (msg, SOUP_STATUS_BAD_REQUEST, "from: not a line number");
      return;
    }
  shoal_tail_poll (r->metrics);
  guint lines = shoal_tail_lines (r->metrics);
  from = MIN (from, lines);
  GString *s = g_string_new ("{\"run\":");
  JsonNode *node = json_node_init_string (json_node_alloc (), r->id);
  char *quoted = json_to_string (node, FALSE);
  json_node_unref (node);
  g_string_append (s, quoted);
  g_free (quoted);
  g_string_append_printf (s, ",\"generation\":%u,\"from\":%u,\"next\":%u,\"damaged\":%u,\"lines\":[",
                          shoal_tail_generation (r->metrics), (guint) from, lines, shoal_tail_damaged (r->metrics));
  shoal_tail_append_json (r->metrics, (guint) from, lines, s);
  g_string_append (s, "]}");
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  gsize len = s->len;
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_TAKE, g_string_free (s, FALSE), len);
}

/* A compare folder's file `name`, opened without following a link. */
static void
api_compare_file (ShoalDashboard *d, SoupServerMessage *msg, GHashTable *query, const char *name, const char *type)
{
  const char *id = query != NULL ? g_hash_table_lookup (query, "compare") : NULL;
  guint status;
  const char *why;
  ShoalCompareDir *c = shoal_runs_find_compare (d->runs, id, &status, &why);
  if (c == NULL)
    {
      answer_error (msg, status, why);
      return;
    }
  char *path = g_build_filename (c->dir, name, NULL);
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  g_free (path);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size > REPORT_MAX)
    {
      if (fd >= 0)
        close (fd);
      answer_error (msg, SOUP_STATUS_NOT_FOUND, "the compare folder has no such file yet");
      return;
    }
  char *text = g_malloc ((gsize) st.st_size + 1);
  ssize_t got = read (fd, text, (gsize) st.st_size);
  close (fd);
  if (got < 0)
    {
      g_free (text);
      answer_error (msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, "cannot read the file");
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, type, SOUP_MEMORY_TAKE, text, (gsize) got);
}

static void
api_events (ShoalDashboard *d, SoupServerMessage *msg, GHashTable *query)
{
  const char *watch = query != NULL ? g_hash_table_lookup (query, "watch") : NULL;
  JsonParser *p = json_parser_new ();
  JsonObject *o = NULL;
  if (watch != NULL && json_parser_load_from_data (p, watch, -1, NULL) && json_parser_get_root (p) != NULL
      && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p)))
    o = json_node_get_object (json_parser_get_root (p));
  if (watch != NULL && o == NULL)
    answer_error (msg, SOUP_STATUS_BAD_REQUEST, "watch: not a JSON object {\"RUN\": lines, ...}");
  else
    shoal_event_feed_add (d->feed, msg, o);
  g_object_unref (p);
}

/* ---- who may ask -------------------------------------------------------- */

/* A constant-time comparison: the time taken says nothing about the token. */
static gboolean
same_secret (const char *a, const char *b)
{
  gsize la = strlen (a), lb = strlen (b);
  guint8 diff = la != lb;
  for (gsize i = 0; i < la; i++)
    diff |= (guint8) (a[i] ^ b[i % MAX (lb, 1)]);
  return diff == 0;
}

static gboolean
token_ok (ShoalDashboard *d, SoupServerMessage *msg, GHashTable *query)
{
  if (d->token == NULL)
    return TRUE;
  const char *given = query != NULL ? g_hash_table_lookup (query, "token") : NULL;
  const char *auth = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");
  if (given == NULL && auth != NULL && g_str_has_prefix (auth, "Bearer "))
    given = auth + 7;
  return given != NULL && same_secret (given, d->token);
}

/* On loopback: the Host the browser asked for is a loopback name. */
static gboolean
host_ok (ShoalDashboard *d, SoupServerMessage *msg)
{
  if (!d->loopback)
    return TRUE;
  const char *host = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Host");
  if (host == NULL)
    return FALSE;
  char *name = NULL;
  if (host[0] == '[')
    {
      const char *end = strchr (host, ']');
      name = end != NULL ? g_strndup (host + 1, (gsize) (end - host - 1)) : NULL;
    }
  else
    {
      const char *colon = strchr (host, ':');
      name = colon != NULL ? g_strndup (host, (gsize) (colon - host)) : g_strdup (host);
    }
  gboolean ok = FALSE;
  if (name != NULL)
    {
      GInetAddress *a = g_inet_address_new_from_string (name);
      ok = g_ascii_strcasecmp (name, "localhost") == 0 || (a != NULL && g_inet_address_get_is_loopback (a));
      g_clear_object (&a);
    }
  g_free (name);
  return ok;
}

static void
handle (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  (void) server;
  ShoalDashboard *d = data;
  common_headers (msg);
  const char *method = soup_server_message_get_method (msg);
  if (method != SOUP_METHOD_GET && method != SOUP_METHOD_HEAD)
    {
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Allow", "GET, HEAD");
      answer_error (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "the dashboard only reads: GET and HEAD");
      return;
    }
  if (!host_ok (d, msg))
    {
      answer_error (msg, SOUP_STATUS_FORBIDDEN, "Host is not a loopback name (this server listens on loopback)");
      return;
    }
  /* the page and its script are the same for everyone and tell nothing of
   * the runs (and a browser loads them without the address's ?token=):
   * the token guards the data */
  if (g_str_has_prefix (path, "/api/") && !token_ok (d, msg, query))
    {
      answer_error (msg, SOUP_STATUS_UNAUTHORIZED, "this dashboard needs its token: ?token=TOKEN in the address");
      return;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (d->assets); i++)
    if (strcmp (path, d->assets[i].path) == 0 || (i == 0 && strcmp (path, "/index.html") == 0))
      {
        if (i == 0)
          /* the page loads nothing from anywhere else */
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Content-Security-Policy",
                                        "default-src 'self'; img-src 'self' data: blob:; style-src 'self' "
                                        "'unsafe-inline'; base-uri 'none'; form-action 'none'; "
                                        "frame-ancestors 'none'");
        gsize len;
        const char *bytes = g_bytes_get_data (d->assets[i].bytes, &len);
        soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
        soup_server_message_set_response (msg, d->assets[i].content_type, SOUP_MEMORY_STATIC, bytes, len);
        return;
      }
  if (strcmp (path, "/favicon.ico") == 0)
    soup_server_message_set_status (msg, SOUP_STATUS_NO_CONTENT, NULL);
  else if (strcmp (path, "/api/runs") == 0)
    api_runs (d, msg);
  else if (strcmp (path, "/api/metrics") == 0)
    api_metrics (d, msg, query);
  else if (strcmp (path, "/api/report") == 0)
    api_compare_file (d, msg, query, "report.md", "text/markdown; charset=utf-8");
  else if (strcmp (path, "/api/results") == 0)
    api_compare_file (d, msg, query, "results.csv", "text/csv; charset=utf-8");
  else if (strcmp (path, "/api/events") == 0)
    api_events (d, msg, query);
  else
    answer_error (msg, SOUP_STATUS_NOT_FOUND, "no such page: the dashboard serves /, its files and /api/...");
}

/* ---- listening -------------------------------------------------------------- */

/* "PORT", "HOST:PORT", "[V6]:PORT" into an address. */
static GInetSocketAddress *
parse_listen (const char *listen, GError **error)
{
  char *host = NULL;
  const char *port_text = listen;
  if (listen[0] == '[')
    {
      const char *end = strstr (listen, "]:");
      if (end != NULL)
        {
          host = g_strndup (listen + 1, (gsize) (end - listen - 1));
          port_text = end + 2;
        }
    }
  else if (strrchr (listen, ':') != NULL)
    {
      const char *colon = strrchr (listen, ':');
      host = g_strndup (listen, (gsize) (colon - listen));
      port_text = colon + 1;
    }
  guint64 port;
  GInetAddress *address = NULL;
  if (host == NULL || g_ascii_strcasecmp (host, "localhost") == 0)
    address = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  else
    address = g_inet_address_new_from_string (host);
  if (address == NULL || !g_ascii_string_to_unsigned (port_text, 10, 0, 65535, &port, NULL))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--listen %s: expected PORT, ADDRESS:PORT or "
                   "[IPV6]:PORT with a numeric address and a port up to 65535 (e.g. 127.0.0.1:6070)", listen);
      g_clear_object (&address);
      g_free (host);
      return NULL;
    }
  GInetSocketAddress *sa = G_INET_SOCKET_ADDRESS (g_inet_socket_address_new (address, (guint16) port));
  g_object_unref (address);
  g_free (host);
  return sa;
}

/* The listening socket, made here rather than by libsoup for its backlog:
 * GLib's default (10) drops the connections of many pages opened at once
 * while the server is busy, and they come back only after SYN retries. */
static GSocket *
listen_socket (GInetSocketAddress *address, GError **error)
{
  GSocket *socket = g_socket_new (g_socket_address_get_family (G_SOCKET_ADDRESS (address)), G_SOCKET_TYPE_STREAM,
                                  G_SOCKET_PROTOCOL_TCP, error);
  if (socket == NULL)
    return NULL;
  g_socket_set_listen_backlog (socket, LISTEN_BACKLOG);
  if (!g_socket_bind (socket, G_SOCKET_ADDRESS (address), TRUE, error) || !g_socket_listen (socket, error))
    g_clear_object (&socket);
  return socket;
}

ShoalDashboard *
shoal_dashboard_new (const ShoalDashboardOptions *o, GError **error)
{
  const char *listen = o->listen != NULL ? o->listen : SHOAL_DASHBOARD_DEFAULT_LISTEN;
  GInetSocketAddress *address = parse_listen (listen, error);
  if (address == NULL)
    return NULL;
  GInetAddress *ip = g_inet_socket_address_get_address (address);
  gboolean loopback = g_inet_address_get_is_loopback (ip);
  if (!loopback && (o->token == NULL || o->token[0] == '\0'))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--listen %s is not a loopback address: anyone who reaches it could read the runs; give a "
                   "token (--token-file FILE: the job's WORKSPACE/token will do) or listen on 127.0.0.1", listen);
      g_object_unref (address);
      return NULL;
    }

  ShoalDashboard *d = g_new0 (ShoalDashboard, 1);
  d->loopback = loopback;
  d->token = (!loopback || !o->token_if_remote) && o->token != NULL && o->token[0] != '\0' ? g_strdup (o->token) : NULL;
  d->context = g_main_context_new ();
  d->loop = g_main_loop_new (d->context, FALSE);
  if (!load_assets (d, error))
    goto fail;
  d->runs = shoal_runs_new (o->dirs, error);
  if (d->runs == NULL)
    goto fail;
  if (!o->allow_no_runs && shoal_runs_count (d->runs) == 0)
    {
      GString *dirs = g_string_new (NULL);
      for (int i = 0; o->dirs[i] != NULL; i++)
        g_string_append_printf (dirs, "%s%s", i > 0 ? ", " : "", o->dirs[i]);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: no runs (no metrics.jsonl in %s or its folders down to 4 levels): give a workspace "
                   "(shoal run --workspace) or a compare folder (shoal compare --out)",
                   dirs->str, o->dirs[1] != NULL ? "them" : "it");
      g_string_free (dirs, TRUE);
      goto fail;
    }
  d->feed = shoal_event_feed_new (d->runs, d->context);

  /* the server's sources go to the context pushed while it is made and listens */
  g_main_context_push_thread_default (d->context);
  d->server = soup_server_new ("server-header", "shoal-dashboard", NULL);
  soup_server_add_handler (d->server, NULL, handle, d, NULL);
  GError *e = NULL;
  GSocket *socket = listen_socket (address, &e);
  gboolean listening = socket != NULL && soup_server_listen_socket (d->server, socket, 0, &e);
  /* the address it listens on (port 0: the one the kernel gave), read
   * here: libsoup 3.2's soup_server_get_uris keeps the address it reads
   * past the server's end (a leak fixed in libsoup 3.4.3) */
  GSocketAddress *bound = listening ? g_socket_get_local_address (socket, &e) : NULL;
  g_clear_object (&socket);
  g_main_context_pop_thread_default (d->context);
  if (bound == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "--listen %s: cannot listen: %s%s", listen, e->message,
                   e->code == G_IO_ERROR_ADDRESS_IN_USE ? " (another program has this port: pick another one, "
                                                          "or port 0 for any free one)" : "");
      g_error_free (e);
      goto fail;
    }
  GInetSocketAddress *inet = G_INET_SOCKET_ADDRESS (bound);
  char *host = g_inet_address_to_string (g_inet_socket_address_get_address (inet));
  gboolean v6 = strchr (host, ':') != NULL;
  d->url = g_strdup_printf ("http://%s%s%s:%u/%s%s", v6 ? "[" : "", host, v6 ? "]" : "",
                            (guint) g_inet_socket_address_get_port (inet), d->token != NULL ? "?token=" : "",
                            d->token != NULL ? d->token : "");
  g_free (host);
  g_object_unref (bound);
  g_object_unref (address);
  return d;

fail:
  g_object_unref (address);
  shoal_dashboard_free (d);
  return NULL;
}

const char *
shoal_dashboard_url (const ShoalDashboard *d)
{
  return d->url;
}

char *
shoal_dashboard_describe (const ShoalDashboard *d)
{
  guint runs = shoal_runs_count (d->runs), compares = shoal_runs_compare_count (d->runs);
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%u run%s", runs, runs == 1 ? "" : "s");
  if (compares > 0)
    g_string_append_printf (s, " (%u compare folder%s)", compares, compares == 1 ? "" : "s");
  g_string_append (s, " under ");
  for (guint i = 0; i < shoal_runs_root_count (d->runs); i++)
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", shoal_runs_root_dir (d->runs, i));
  return g_string_free (s, FALSE);
}

static gboolean
quit_loop (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

void
shoal_dashboard_run (ShoalDashboard *d)
{
  g_main_context_push_thread_default (d->context);
  GSource *sources[3] = { g_unix_signal_source_new (SIGINT), g_unix_signal_source_new (SIGTERM),
                          g_unix_signal_source_new (SIGHUP) };
  for (int i = 0; i < 3; i++)
    {
      g_source_set_callback (sources[i], quit_loop, d->loop, NULL);
      g_source_attach (sources[i], d->context);
    }
  g_main_loop_run (d->loop);
  for (int i = 0; i < 3; i++)
    {
      g_source_destroy (sources[i]);
      g_source_unref (sources[i]);
    }
  g_main_context_pop_thread_default (d->context);
}

static gpointer
serve_thread (gpointer data)
{
  ShoalDashboard *d = data;
  g_main_context_push_thread_default (d->context);
  g_main_loop_run (d->loop);
  g_main_context_pop_thread_default (d->context);
  return NULL;
}

void
shoal_dashboard_start_thread (ShoalDashboard *d)
{
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, &old);
  d->thread = g_thread_new ("dashboard", serve_thread, d);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
}

void
shoal_dashboard_free (ShoalDashboard *d)
{
  if (d == NULL)
    return;
  if (d->thread != NULL)
    {
      GSource *quit = g_idle_source_new ();
      g_source_set_callback (quit, quit_loop, d->loop, NULL);
      g_source_attach (quit, d->context);
      g_source_unref (quit);
      g_thread_join (d->thread);
    }
  /* the feed's clients hold messages of the server: they go first */
  g_main_context_push_thread_default (d->context);
  shoal_event_feed_free (d->feed);
  if (d->server != NULL)
    {
      soup_server_disconnect (d->server);
      g_object_unref (d->server);
    }
  /* what disconnecting left to do */
  while (g_main_context_iteration (d->context, FALSE))
    ;
  g_main_context_pop_thread_default (d->context);
  shoal_runs_free (d->runs);
  for (gsize i = 0; i < G_N_ELEMENTS (d->assets); i++)
    if (d->assets[i].bytes != NULL)
      g_bytes_unref (d->assets[i].bytes);
  g_main_loop_unref (d->loop);
  g_main_context_unref (d->context);
  g_free (d->token);
  g_free (d->url);
  g_free (d);
}
