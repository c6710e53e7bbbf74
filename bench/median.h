/* The median of a bench's samples (sorts them in place); included by the
 * bench programs, each built from its one file. */
#ifndef SHOAL_BENCH_MEDIAN_H
#define SHOAL_BENCH_MEDIAN_H

#include <stdlib.h>

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
median (double *v, int n)
{
  qsort (v, (size_t) n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
