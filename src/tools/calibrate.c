/* shoal calibrate JOB.conf --out FILE: measures what the virtual clock's
 * timing model needs for this model on this machine (emulate/calibration.h)
 * and writes it, so that every later run, compare or sweep given
 * -o emulate.calibration=FILE repeats exactly and names where its times
 * came from. */
#include <glib.h>
#include <stdio.h>

#include "tools/commands.h"
#include "emulate/calibration.h"
#include "job/job.h"

int
shoal_cmd_calibrate (int argc, char **argv)
{
  char *out = NULL;
  char **overrides = NULL;
  int steps = 50;
  GOptionEntry entries[] = {
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "the calibration file to write (required)", "FILE" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "timed training steps of one worker's batch (default 50)", "N" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "set a conf key as the runs will, e.g. -o job.threads=1", "SECTION.KEY=VALUE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - measure the model's step times, update cost and memory "
                                              "for the virtual clock");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  ShoalJob *job = NULL;
  ShoalCalibration cal = { 0 };
  int status = 0;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "shoal calibrate: %s\n", error->message);
      status = 2;
      goto out;
    }
  if (argc != 2 || out == NULL || steps < 1 || steps > 100000)
    {
      fprintf (stderr, "shoal calibrate: %s\n", argc != 2 ? "expected one JOB.conf"
                                                : out == NULL ? "--out FILE is required"
                                                              : "--steps: give 1 to 100000 steps");
      status = 2;
      goto out;
    }
  job = shoal_job_load (argv[1], (const char *const *) overrides, &error);
  if (job == NULL || !shoal_calibration_measure (job, steps, &cal, &error)
      || !shoal_calibration_save (&cal, out, &error))
    {
      fprintf (stderr, "shoal calibrate: %s\n", error->message);
      status = 1;
      goto out;
    }
  printf ("shoal calibrate: %s: model %s, %d steps (median %.3f ms, %d BLAS thread%s), a server's %s update "
          "%.4f ns/byte, a message's transport %.4f ns/byte beyond the wire, %.1f MiB per unit\n"
          "give it to a virtual-clock run: -o emulate.clock=virtual -o emulate.calibration=%s\n",
          out, cal.model, cal.nsteps, shoal_calibration_median_ms (&cal), cal.threads, cal.threads == 1 ? "" : "s",
          cal.updater, cal.update_ns_per_byte, cal.rpc_ns_per_byte, (double) cal.unit_bytes / 1048576.0, out);

out:
  shoal_calibration_clear (&cal);
  shoal_job_free (job);
  g_clear_error (&error);
  g_strfreev (overrides);
  g_free (out);
  g_option_context_free (ctx);
  return status;
}
