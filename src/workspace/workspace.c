/* Reading and naming the parts of a workspace; see workspace/workspace.h. */
#include "workspace/workspace.h"

#include "core/error.h"
#include "core/param.h"
#include "data/checkpoint.h"

char *
shoal_checkpoint_dir (const char *workspace, int rank)
{
  char *leaf = g_strdup_printf ("rank-%d", rank);
  char *dir = g_build_filename (workspace, "checkpoint", leaf, NULL);
  g_free (leaf);
  return dir;
}

GBytes *
shoal_workspace_params (const char *workspace, gint64 *step, GError **error)
{
  char *dir = shoal_checkpoint_dir (workspace, 0);
  ShoalCheckpoint *c = shoal_checkpoint_open (dir, FALSE, error);
  g_free (dir);
  if (c == NULL)
    return NULL;
  gint64 steps[2];
  GBytes *blob = NULL;
  if (shoal_checkpoint_steps (c, "params", steps) == 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: no trained params in its checkpoint",
                 workspace);
  else
    blob = shoal_checkpoint_load (c, "params", steps[0], error);
  shoal_checkpoint_close (c);
  if (blob != NULL && step != NULL)
    *step = steps[0];
  return blob;
}

GBytes *
shoal_workspace_params_from (const char *from, GError **error)
{
  if (g_file_test (from, G_FILE_TEST_IS_DIR))
    return shoal_workspace_params (from, NULL, error);
  if (!g_file_test (from, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: no such workspace or params file", from);
      return NULL;
    }
  return shoal_param_file_read (from, error);
}
