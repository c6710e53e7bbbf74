/* Plots through Debian's gnuplot (pngcairo terminal): shoal writes the
 * numbers as whitespace-separated data files and a script beside them,
 * and gnuplot draws - both stay in the output directory, so a figure can
 * be restyled by editing the script and running gnuplot again. */
#ifndef SHOAL_GNUPLOT_H
#define SHOAL_GNUPLOT_H

#include <glib.h>

#include "tools/runlog.h"

G_BEGIN_DECLS

/* The lines every shoal script starts with: pngcairo, a size, a font. */
#define SHOAL_GNUPLOT_HEADER \
  "set terminal pngcairo size 960,600 enhanced font 'DejaVu Sans,11'\n" \
  "set grid\nset key outside right top\nset datafile separator whitespace\n"

/* Whether gnuplot is in PATH.  A command whose figures come beside its
 * data (shoal compare) writes the data, the scripts and the report
 * without it and says how to draw the figures later; one whose job is
 * the figure (shoal plot) fails in shoal_gnuplot_run. */
gboolean shoal_gnuplot_installed (void);
/* Runs `gnuplot SCRIPT` in `dir`; an error names gnuplot's complaint,
 * or says to install it (make deps: gnuplot-nox). */
gboolean shoal_gnuplot_run (const char *dir, const char *script, GError **error);
/* A figure with nothing to draw: an empty frame saying `why`.  gnuplot
 * refuses a plot without one defined point (plot 1/0, files with no
 * valid points), and a report shows every figure; the frame's range
 * holds on linear and log axes alike. */
void shoal_gnuplot_empty_frame (GString *gp, const char *why);
/* s as a gnuplot string literal in double quotes (g_free). */
char *shoal_gnuplot_quote (const char *s);
/* Writes points as lines "time samples value" (ShoalRunPoint). */
gboolean shoal_gnuplot_write_points (const char *path, const GArray *points, GError **error);

G_END_DECLS

#endif
