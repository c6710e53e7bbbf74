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
