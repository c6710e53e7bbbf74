/* Every built-in layer type, one line each: SHOAL_LAYER (type) means
 * src/layers/<type>.c defines `const ShoalLayerOps shoal_layer_<type>_ops`
 * and the CUDA backend a GPU path for it (src/gpu/register.c registers
 * the GPU paths of this list); SHOAL_LAYER_CPU_ONLY (type, why) is a type
 * without one, and says why.  Kept alphabetical; the registry, the GPU
 * registration and test/test_coverage.c (a gradient check or a stated
 * reason for every type) come from this list.  A file that makes no
 * difference defines SHOAL_LAYER_CPU_ONLY (type, why) as SHOAL_LAYER (type). */
SHOAL_LAYER (accuracy)
SHOAL_LAYER (batchnorm)
SHOAL_LAYER_CPU_ONLY (bridge_dst, "joins a group's partitions, and a group of k > 1 workers is refused on a GPU")
SHOAL_LAYER_CPU_ONLY (bridge_src, "joins a group's partitions, and a group of k > 1 workers is refused on a GPU")
SHOAL_LAYER (concat)
SHOAL_LAYER (conv)
SHOAL_LAYER (dense)
SHOAL_LAYER (dropout)
SHOAL_LAYER (embedding)
SHOAL_LAYER (euclidean_loss)
SHOAL_LAYER (feed)
SHOAL_LAYER (gru)
SHOAL_LAYER (lrn)
SHOAL_LAYER (lstm)
SHOAL_LAYER (pooling)
SHOAL_LAYER (rbm_free_energy)
SHOAL_LAYER (rbm_hidden)
SHOAL_LAYER (rbm_visible)
SHOAL_LAYER (relu)
SHOAL_LAYER (sigmoid)
SHOAL_LAYER (sigmoid_cross_entropy_loss)
SHOAL_LAYER_CPU_ONLY (slice, "a connection layer of partitioned groups, which are refused on a GPU")
SHOAL_LAYER (softmax_loss)
SHOAL_LAYER (stanh)
SHOAL_LAYER (tanh)
