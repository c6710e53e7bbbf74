/* Memory shared by two processes of one host, for the bytes of param
 * slices; the calls that say what to do with them stay Thrift.
 *
 * One side creates a region (an anonymous memfd, sealed so that its size
 * can never change again) and offers it to the other: its pid, the
 * descriptor's number, its size and a random nonce that the creator wrote
 * into the region's header.  The other side opens it through
 * /proc/PID/fd/FD, which works only on the same host, in the same PID
 * namespace and as the same user; everywhere else the open fails and the
 * caller goes on over the socket.
 *
 * A region is validated like a message before anything of it is used:
 * the link must name a shoal memfd, the file must be a regular file of
 * exactly the offered size, sealed against shrinking (a peer that could
 * shrink it could make the reader fault past its end: SIGBUS), and the
 * header must hold the magic, the version and the nonce the offer
 * carried over the authenticated connection.  Nothing is read from the
 * header again afterwards: offsets come from the offer and the job's
 * layout, and are checked against the size.  What the peer writes into
 * the data later is data, never a length or a pointer. */
#ifndef SHOAL_SHM_REGION_H
#define SHOAL_SHM_REGION_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

#define SHOAL_SHM_NONCE_BYTES 16

typedef struct {
  gint32 pid;
  gint32 fd;
  gint64 bytes;                          /* the whole file, header included */
  guint8 nonce[SHOAL_SHM_NONCE_BYTES];
  char host[40];                         /* the creator's boot id: regions of another host are not tried */
} ShoalShmOffer;

typedef struct _ShoalShmRegion ShoalShmRegion;

/* Creates a region whose data holds `data_bytes` (zeroed, page-aligned,
 * so that floats in it are 64-byte aligned), mapped read-write.  `name`
 * shows in /proc/PID/fd ("memfd:shoal-NAME").  NULL with a
 * SHOAL_ERROR_RPC error where memfd or sealing is not available. */
ShoalShmRegion *shoal_shm_region_create (const char *name, size_t data_bytes, GError **error);

/* What the peer needs to attach the region (valid while it lives). */
void shoal_shm_region_offer (ShoalShmRegion *region, ShoalShmOffer *offer);

/* Opens and maps (read-write) the region another process offered, after
 * every check above; `want_data_bytes` is the data size this side
 * expects.  NULL with a SHOAL_ERROR_RPC error saying which check failed
 * (the caller falls back to the socket). */
ShoalShmRegion *shoal_shm_region_attach (const ShoalShmOffer *offer, size_t want_data_bytes,
                                         GError **error);

/* The data: data_bytes bytes, page-aligned. */
void *shoal_shm_region_data (ShoalShmRegion *region);
size_t shoal_shm_region_data_bytes (ShoalShmRegion *region);

/* This machine's boot id ("" where unknown); two processes with the same
 * one run on the same kernel. */
const char *shoal_shm_host_id (void);

/* Unmaps and closes.  NULL is ignored. */
void shoal_shm_region_free (ShoalShmRegion *region);

G_END_DECLS

#endif
