/* Every built-in layer type, one line each: SHOAL_LAYER (type) means
 * src/layers/<type>.c defines `const ShoalLayerOps shoal_layer_<type>_ops`.
 * Kept alphabetical; the registry and the docs come from this list. */
SHOAL_LAYER (accuracy)
SHOAL_LAYER (batchnorm)
SHOAL_LAYER (concat)
SHOAL_LAYER (conv)
SHOAL_LAYER (dense)
SHOAL_LAYER (dropout)
SHOAL_LAYER (euclidean_loss)
SHOAL_LAYER (feed)
SHOAL_LAYER (lmdb_input)
SHOAL_LAYER (lrn)
SHOAL_LAYER (pooling)
SHOAL_LAYER (relu)
SHOAL_LAYER (sigmoid)
SHOAL_LAYER (softmax_loss)
SHOAL_LAYER (stanh)
SHOAL_LAYER (tanh)
