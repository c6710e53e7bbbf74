/* shoal calibrate JOB.conf --out FILE: measures what the virtual clock's
 * timing model needs for this model on this machine (emulate/calibration.h)
 * and writes it, so that every later run, compare or sweep given
 * -o emulate.calibration=FILE repeats exactly and names where its times
 * came from. */
#include <glib.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <stdio.h>

#include "tools/commands.h"
#include "emulate/calibration.h"
#include "job/job.h"

int
shoal_cmd_calibrate (int argc, char **argv)
{
  char *out = NULL;
  char **overrides = NULL;
  int steps = -1, concurrent = 1;    /* -1: not given */
  double seconds = -1;
  GOptionEntry entries[] = {
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "the calibration file to write (required)", "FILE" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "timed training steps of each worker's batch (default: as many as "
      "--seconds take)", "N" },
    { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "time steps for this long, at least 50 of them (default 3)",
      "S" },
    { "concurrent", 0, 0, G_OPTION_ARG_INT, &concurrent, "workers stepping at once on this host, each its own net and "
      "thread, every step timed while all are busy: the compute of a layout that puts that many workers on one "
      "host (default 1)", "K" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "set a conf key as the runs will, e.g. -o job.threads=1", "SECTION.KEY=VALUE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - measure what the virtual clock's timing model needs "
                                              "for this model here");
  g_option_context_set_summary (ctx, "The step times, when in a step each layer's gradients are final (the "
                                     "backward's hand-offs), a test batch's forward, a server's update, a "
                                     "message's transport, the in-process exchange and Hogwild's sync passes per "
                                     "byte, and a unit's memory (docs/SCALE.md, \"Calibration\").");
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
  const char *bad = argc != 2 ? "expected one JOB.conf"
                    : out == NULL ? "--out FILE is required"
                    : steps != -1 && (steps < 1 || steps > SHOAL_CALIBRATION_MAX_STEPS)
                      ? "--steps: give 1 to 100000 steps"
                    : seconds != -1 && !(seconds > 0 && seconds <= 3600)
                      ? "--seconds: give a time above 0 and at most 3600"
                    : steps != -1 && seconds != -1 ? "give --steps or --seconds, not both"
                    : concurrent < 1 || concurrent > SHOAL_CALIBRATION_MAX_CONCURRENT
                      ? "--concurrent: give 1 to 256 workers"
                      : NULL;
  if (bad != NULL)
    {
      fprintf (stderr, "shoal calibrate: %s\n", bad);
      status = 2;
      goto out;
    }
  ShoalCalibrationPlan plan = { .steps = MAX (steps, 0), .seconds = steps > 0 ? 0 : seconds > 0 ? seconds : 3,
                                .concurrent = concurrent };
  /* where the file goes, before the seconds of measuring it */
  char *out_dir = g_path_get_dirname (out);
  if (!g_file_test (out_dir, G_FILE_TEST_IS_DIR) || g_access (out_dir, W_OK) != 0)
    {
      fprintf (stderr, "shoal calibrate: --out %s: %s is not a directory this user may write to\n", out, out_dir);
      status = 2;
    }
  g_free (out_dir);
  if (status != 0)
    goto out;
  job = shoal_job_load (argv[1], (const char *const *) overrides, &error);
  if (job == NULL || !shoal_calibration_measure (job, &plan, &cal, &error)
      || !shoal_calibration_save (&cal, out, &error))
    {
      fprintf (stderr, "shoal calibrate: %s\n", error->message);
      status = 1;
      goto out;
    }
  char *together = cal.concurrent > 1 ? g_strdup_printf (" of %d workers stepping at once", cal.concurrent)
                                       : g_strdup ("");
  printf ("shoal calibrate: %s: model %s, %d steps%s (median %.3f ms, %d BLAS thread%s), a test batch %.3f ms, a "
          "server's %s update "
          "%.4f ns/byte, a message's transport %.1f us + %.4f ns/byte beyond the wire, an in-process exchange %.4f "
          "ns/byte, a Hogwild sync's passes %.4f + %.4f + %.4f ns/byte, %.1f MiB per unit; %d backward hand-off%s "
          "(the first at %.2f of a step)\n"
          "give it to a virtual-clock run: -o emulate.clock=virtual -o emulate.calibration=%s\n",
          out, cal.model, cal.nsteps, together, shoal_calibration_median_ms (&cal), cal.threads,
          cal.threads == 1 ? "" : "s", cal.test_batch_ms,
          cal.updater, cal.update_ns_per_byte, cal.rpc_us_per_message, cal.rpc_ns_per_byte,
          cal.pull_ns_per_byte, cal.sync_take_ns_per_byte, cal.sync_apply_ns_per_byte, cal.sync_merge_ns_per_byte,
          (double) cal.unit_bytes / 1048576.0, cal.n_ready, cal.n_ready == 1 ? "" : "s",
          cal.n_ready > 0 ? cal.ready_fraction[0] : 1.0, out);
  g_free (together);
  printf ("the wire codecs' encoding + decoding, ns a value:");
  for (int c = SHOAL_CODEC_FP16; c < SHOAL_CODEC_COUNT; c++)
    printf ("%s %s %.2f + %.2f", c == SHOAL_CODEC_FP16 ? "" : ",", shoal_codec_name ((ShoalCodec) c),
            cal.encode_ns_per_value[c], cal.decode_ns_per_value[c]);
  printf ("\n");

out:
  shoal_calibration_clear (&cal);
  shoal_job_free (job);
  g_clear_error (&error);
  g_strfreev (overrides);
  g_free (out);
  g_option_context_free (ctx);
  return status;
}
