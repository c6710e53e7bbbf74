/* shoal serve DIR...: the dashboard over finished and running jobs
 * (dashboard/dashboard.h), in the foreground until Ctrl-C. */
#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "core/token.h"
#include "dashboard/dashboard.h"
#include "tools/commands.h"

/* the HMAC message that makes a dashboard token from a token file's */
#define DASHBOARD_TOKEN_PURPOSE "shoal dashboard"

char *
shoal_serve_read_token (const char *path, GError **error)
{
  char *text = shoal_token_read_file (path, error);
  if (text == NULL)
    return NULL;
  /* the address carries a token derived from the file's, never the
   * file's own: a job's token (WORKSPACE/token) given here must not
   * travel in clear HTTP and browser histories, where it would open the
   * job's RPCs to whoever reads it (docs/SECURITY.md) */
  char *derived = shoal_token_derive (text, DASHBOARD_TOKEN_PURPOSE);
  explicit_bzero (text, strlen (text));
  g_free (text);
  return derived;
}

ShoalDashboard *
shoal_serve_beside (const char *dir, const char *where, const char *who, GError **error)
{
  /* a bare port is on loopback */
  char *listen = strchr (where, ':') != NULL ? g_strdup (where) : g_strdup_printf ("127.0.0.1:%s", where);
  char *token = NULL;
  ShoalDashboard *d = NULL;
  if (g_mkdir_with_parents (dir, 0755) != 0)
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno), "%s: cannot create: %s", dir,
                 g_strerror (errno));
  else if ((token = shoal_token_new (error)) != NULL)
    {
      char *dirs[] = { (char *) dir, NULL };
      ShoalDashboardOptions o = { .dirs = dirs, .listen = listen, .token = token, .token_if_remote = TRUE,
                                  .allow_no_runs = TRUE };
      d = shoal_dashboard_new (&o, error);
    }
  if (d != NULL)
    {
      fprintf (stderr, "%s: watch it at %s%s\n", who, shoal_dashboard_url (d),
               strstr (shoal_dashboard_url (d), "token=") != NULL
                 ? " (not loopback: a token of its own is required, keep the address to yourself)" : "");
      shoal_dashboard_start_thread (d);
    }
  else
    g_prefix_error (error, "--serve: ");
  g_free (token);
  g_free (listen);
  return d;
}

int
shoal_cmd_serve (int argc, char **argv)
{
  char *listen = NULL, *token_file = NULL;
  GOptionEntry entries[] = {
    { "listen", 'l', 0, G_OPTION_ARG_STRING, &listen,
      "where to listen (default " SHOAL_DASHBOARD_DEFAULT_LISTEN ", loopback; port 0: any free port); an address "
      "that is not loopback needs --token-file", "ADDRESS:PORT" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      "every request must carry a token made from this file's (?token=... in the address printed; never "
      "the file's own, so a job's WORKSPACE/token will do)", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("DIR... - watch runs in a browser: workspaces and compare folders, "
                                              "live while they train");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 0;
  char *token = NULL;
  ShoalDashboard *d = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      status = 2;
      goto out;
    }
  if (argc < 2)
    {
      fprintf (stderr, "shoal serve: expected at least one folder (a workspace, a compare folder, or a folder "
                       "holding them)\n");
      status = 2;
      goto out;
    }
  if (token_file != NULL && (token = shoal_serve_read_token (token_file, &error)) == NULL)
    {
      status = 2;
      goto out;
    }
  ShoalDashboardOptions o = { .dirs = argv + 1, .listen = listen, .token = token };
  d = shoal_dashboard_new (&o, &error);
  if (d == NULL)
    {
      status = 1;
      goto out;
    }
  char *what = shoal_dashboard_describe (d);
  printf ("shoal serve: %s at %s%s (Ctrl-C stops)\n", what, shoal_dashboard_url (d),
          token != NULL ? " - the token is required: keep the address to yourself" : "");
  g_free (what);
  fflush (stdout);
  shoal_dashboard_run (d);

out:
  if (error != NULL)
    fprintf (stderr, "shoal serve: %s\n", error->message);
  g_clear_error (&error);
  shoal_dashboard_free (d);
  g_free (token);
  g_free (listen);
  g_free (token_file);
  g_option_context_free (ctx);
  return status;
}
