/* Sealed memfd regions shared between the processes of one host; see
 * shm_region.h for what is checked and why. */
#include "rpc/shm_region.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define HEADER_BYTES 4096
#define MAGIC "SHOALSHM"
#define VERSION 1
#define NAME_PREFIX "shoal-"
#define SEALS_NEEDED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

typedef struct {
  char magic[8];
  guint32 version;
  guint32 header_bytes;
  guint64 data_bytes;
  guint8 nonce[SHOAL_SHM_NONCE_BYTES];
} Header;

struct _ShoalShmRegion {
  int fd;
  guint8 *map;            /* header + data */
  size_t map_bytes;
  size_t data_bytes;
  guint8 nonce[SHOAL_SHM_NONCE_BYTES];
};

static size_t
round_page (size_t n)
{
  return (n + HEADER_BYTES - 1) / HEADER_BYTES * HEADER_BYTES;
}

const char *
shoal_shm_host_id (void)
{
  static char id[40];
  static gsize once;
  if (g_once_init_enter (&once))
    {
      char *text = NULL;
      if (g_file_get_contents ("/proc/sys/kernel/random/boot_id", &text, NULL, NULL))
        g_strlcpy (id, g_strstrip (text), sizeof id);
      g_free (text);
      g_once_init_leave (&once, 1);
    }
  return id;
}

/* The host a region's offer names.  Test hook: SHOAL_INJECT_HOST_ID
 * makes this process's offers claim another host, so that servers refuse
 * them and the socket is used (test/e2e/shm_wire.sh). */
static const char *
offer_host_id (void)
{
  const char *injected = g_getenv ("SHOAL_INJECT_HOST_ID");
  return injected != NULL ? injected : shoal_shm_host_id ();
}

static gboolean
fail (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
fail (GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "shared memory: %s", msg);
  g_free (msg);
  return FALSE;
}

ShoalShmRegion *
shoal_shm_region_create (const char *name, size_t data_bytes, GError **error)
{
  char *full = g_strconcat (NAME_PREFIX, name, NULL);
  int fd = memfd_create (full, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int err = errno;
  g_free (full);
  if (fd < 0)
    {
      fail (error, "memfd_create: %s", g_strerror (err));
      return NULL;
    }
  size_t bytes = HEADER_BYTES + round_page (MAX (data_bytes, 1));
  if (ftruncate (fd, (off_t) bytes) < 0 || fcntl (fd, F_ADD_SEALS, SEALS_NEEDED) < 0)
    {
      err = errno;
      close (fd);
      fail (error, "sizing and sealing a region of %zu bytes: %s", bytes, g_strerror (err));
      return NULL;
    }
  void *map = mmap (NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    {
      err = errno;
      close (fd);
      fail (error, "mapping %zu bytes: %s", bytes, g_strerror (err));
      return NULL;
    }
  ShoalShmRegion *r = g_new0 (ShoalShmRegion, 1);
  r->fd = fd;
  r->map = map;
  r->map_bytes = bytes;
  r->data_bytes = bytes - HEADER_BYTES;
  if (getrandom (r->nonce, sizeof r->nonce, 0) != (ssize_t) sizeof r->nonce)
    {
      /* no entropy source: a nonce from GLib's generator still tells
       * regions apart, which is all it is for between processes of one user */
      for (size_t i = 0; i < sizeof r->nonce; i++)
        r->nonce[i] = (guint8) g_random_int ();
    }
  Header *h = (Header *) r->map;
  memcpy (h->magic, MAGIC, sizeof h->magic);
  h->version = VERSION;
  h->header_bytes = HEADER_BYTES;
  h->data_bytes = r->data_bytes;
  memcpy (h->nonce, r->nonce, sizeof h->nonce);
  return r;
}

void
shoal_shm_region_offer (ShoalShmRegion *r, ShoalShmOffer *offer)
{
  memset (offer, 0, sizeof *offer);
  offer->pid = (gint32) getpid ();
  offer->fd = r->fd;
  offer->bytes = (gint64) r->map_bytes;
  memcpy (offer->nonce, r->nonce, sizeof offer->nonce);
  g_strlcpy (offer->host, offer_host_id (), sizeof offer->host);
}

ShoalShmRegion *
shoal_shm_region_attach (const ShoalShmOffer *offer, size_t want_data_bytes, GError **error)
{
  const char *here = shoal_shm_host_id ();
  if (offer->host[0] != '\0' && here[0] != '\0' && strcmp (offer->host, here) != 0)
    {
      fail (error, "the region is on another host");
      return NULL;
    }
  if (offer->pid <= 0 || offer->fd < 0 || offer->bytes < HEADER_BYTES
      || (guint64) offer->bytes - HEADER_BYTES < want_data_bytes
      || (guint64) offer->bytes > (guint64) G_MAXSSIZE)
    {
      fail (error, "a region of %" G_GINT64_FORMAT " bytes of process %d, fd %d cannot hold %zu bytes of data",
            offer->bytes, offer->pid, offer->fd, want_data_bytes);
      return NULL;
    }
  char path[64], link[256];
  g_snprintf (path, sizeof path, "/proc/%d/fd/%d", offer->pid, offer->fd);
  /* look before opening: never open a peer's pipe, socket or terminal */
  ssize_t n = readlink (path, link, sizeof link - 1);
  if (n < 0)
    {
      fail (error, "%s: %s", path, g_strerror (errno));
      return NULL;
    }
  link[n] = '\0';
  if (!g_str_has_prefix (link, "/memfd:" NAME_PREFIX))
    {
      fail (error, "%s is not a shoal region", path);
      return NULL;
    }
  int fd = open (path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    {
      fail (error, "opening %s: %s", path, g_strerror (errno));
      return NULL;
    }
  struct stat st;
  int seals = fcntl (fd, F_GET_SEALS);
  void *map = MAP_FAILED;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size != offer->bytes)
    fail (error, "%s is not a file of the %" G_GINT64_FORMAT " bytes offered", path, offer->bytes);
  else if (seals < 0 || (seals & SEALS_NEEDED) != SEALS_NEEDED)
    fail (error, "%s is not sealed against resizing", path);
  else if ((map = mmap (NULL, (size_t) offer->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    fail (error, "mapping %s: %s", path, g_strerror (errno));
  else
    {
      Header h;
      memcpy (&h, map, sizeof h);   /* once: the peer may change it at any time */
      if (memcmp (h.magic, MAGIC, sizeof h.magic) != 0 || h.version != VERSION
          || h.header_bytes != HEADER_BYTES || h.data_bytes != (guint64) offer->bytes - HEADER_BYTES
          || memcmp (h.nonce, offer->nonce, sizeof h.nonce) != 0)
        fail (error, "%s does not hold the region offered", path);
      else
        {
          ShoalShmRegion *r = g_new0 (ShoalShmRegion, 1);
          r->fd = fd;
          r->map = map;
          r->map_bytes = (size_t) offer->bytes;
          r->data_bytes = r->map_bytes - HEADER_BYTES;
          memcpy (r->nonce, offer->nonce, sizeof r->nonce);
          return r;
        }
    }
  if (map != MAP_FAILED)
    munmap (map, (size_t) offer->bytes);
  close (fd);
  return NULL;
}

void *
shoal_shm_region_data (ShoalShmRegion *r)
{
  return r->map + HEADER_BYTES;
}

size_t
shoal_shm_region_data_bytes (ShoalShmRegion *r)
{
  return r->data_bytes;
}

void
shoal_shm_region_free (ShoalShmRegion *r)
{
  if (r == NULL)
    return;
  munmap (r->map, r->map_bytes);
  close (r->fd);
  g_free (r);
}
