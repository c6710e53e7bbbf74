/* shoal: a distributed deep-learning framework in C, and the layer
 * library underneath it.  The one header applications include:
 *
 *   #include <shoal/shoal.h>
 *   cc app.c $(pkg-config --cflags --libs shoal)
 *
 * What is where:
 *   shoal/version.h  SHOAL_VERSION_STRING, SHOAL_CHECK_VERSION, shoal_version ()
 *   shoal/error.h    the error domain and every code
 *   shoal/tensor.h   shapes, tensors (borrowed views), aligned buffers
 *   shoal/conf.h     confs and option tables
 *   shoal/rng.h      seeded random streams
 *   shoal/param.h    params, the param store, params by name as bytes
 *   shoal/updater.h  update rules and schedules; ShoalUpdater for a store
 *   shoal/layer.h    the layer contract, accessors, registry, gradient checks
 *   shoal/net.h      nets: build, feed, forward, backward, save and load params
 *   shoal/model.h    trained models for predictions
 *   shoal/job.h      whole jobs trained in this process
 *   shoal/plugin.h   layer types in shared libraries
 *
 * Ownership, in one rule: what a call returns as "new" is the caller's
 * (free it with the call named); everything else is borrowed from the
 * object it came from and valid while that object lives.  Every failure
 * is a GError in SHOAL_ERROR (shoal/error.h); the library never exits.
 *
 * Arguments, as GLib's own calls treat them: a NULL where a call needs an
 * object (or a value outside its contract, such as a phase that is
 * neither train nor test, or shoal_net_backward before a train forward)
 * is a programmer's error: the call logs a critical, as
 * g_return_val_if_fail does, leaves *error unset and returns its failure
 * value (NULL, FALSE, 0, NaN for a loss).  Bad data - a file, a conf, a
 * row count, a name the net lacks - is a GError with the code the call's
 * header lists.  Free functions ignore NULL.  Not checked, so that they
 * cost nothing: the per-number draws of shoal/rng.h (shoal_rng_u32,
 * _below, _uniform, _gaussian) and shoal/updater.h's calls on a conf or
 * schedule the caller holds.  test/test_preconditions.c calls every
 * other entry point with NULL and with bad values.
 *
 * Linking: a program that uses tensors, layers, nets and updaters only
 * (shoal/tensor.h .. shoal/net.h) needs neither Thrift nor LMDB: with
 * the shared library they are libshoal's own dependencies, and a static
 * link pulls in only the objects it uses (docs/LIBRARY.md). */
#ifndef SHOAL_PUBLIC_SHOAL_H
#define SHOAL_PUBLIC_SHOAL_H

#include <shoal/version.h>
#include <shoal/error.h>
#include <shoal/tensor.h>
#include <shoal/conf.h>
#include <shoal/rng.h>
#include <shoal/param.h>
#include <shoal/updater.h>
#include <shoal/layer.h>
#include <shoal/net.h>
#include <shoal/model.h>
#include <shoal/job.h>
#include <shoal/plugin.h>

#endif
