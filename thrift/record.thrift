/* On-disk format of one example in an LMDB dataset.  Values are Record
 * structs serialised with the Thrift binary protocol into a memory buffer.
 * Next free field id: 6 */
namespace c_glib Shoal

struct Record {
  /* class label; -1 when the record has none */
  1: i32 label = -1,
  /* shape of one example without the batch dim, e.g. [1, 28, 28] */
  2: list<i32> shape,
  /* either uint8 pixels ... */
  3: optional binary pixels,
  /* ... or little-endian float32 values */
  4: optional binary floats,
  /* optional float targets for regression (Euclidean loss) */
  5: optional binary targets,
}
