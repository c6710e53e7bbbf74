/* The layer types of the data module: inputs that read datasets
 * (lmdb_input, text_input).  They live here, not in src/layers, so that a program
 * built on the layer library alone links without LMDB or Thrift.
 *
 * They are registered into the layer registry (layers/layer.h) when this
 * module is loaded: always with libshoal.so, and in a static link
 * whenever the program uses the data module (shoal_job_load does).  A
 * static program that uses them only through a conf calls
 * shoal_data_register_layers itself. */
#ifndef SHOAL_DATA_LAYERS_H
#define SHOAL_DATA_LAYERS_H

#include <glib.h>

#include "layers/layer.h"

G_BEGIN_DECLS

extern const ShoalLayerOps shoal_layer_lmdb_input_ops;
extern const ShoalLayerOps shoal_layer_text_input_ops;

/* Registers every data layer type; idempotent and thread-safe. */
void shoal_data_register_layers (void);

G_END_DECLS

#endif
