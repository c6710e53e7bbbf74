/* What other layers may ask of a text_input layer (text_input.c). */
#ifndef SHOAL_TEXT_INPUT_H
#define SHOAL_TEXT_INPUT_H

#include "layers/layer.h"

G_BEGIN_DECLS

extern const ShoalLayerOps shoal_layer_text_input_ops;

/* The number of ids of its data (the vocabulary). */
int shoal_text_input_vocab_size (const ShoalLayer *layer);

G_END_DECLS

#endif
