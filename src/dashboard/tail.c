/* The lines live in one GString (each followed by '\n') with their
 * start offsets beside it, so a reader's slice is one memcpy and a poll
 * costs one fstat when nothing changed. */
#include "dashboard/tail.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most one poll reads: a huge file comes in over several polls, so
 * one run cannot hold up the others (or the page's answers) for long. */
#define POLL_READ_MAX (4 << 20)

struct _ShoalTail {
  char *path;
  int fd;                 /* -1 while the file is not open */
  dev_t dev;
  ino_t ino;
  goffset offset;         /* bytes of the file consumed so far */
  GString *partial;       /* the last line, not finished yet */
  GString *text;          /* the valid lines, each ending in '\n' */
  GArray *starts;         /* gsize: where each valid line starts in text */
  guint damaged;
  guint generation;
  JsonParser *parser;
};

ShoalTail *
shoal_tail_new (const char *path)
{
  ShoalTail *t = g_new0 (ShoalTail, 1);
  t->path = g_strdup (path);
  t->fd = -1;
  t->partial = g_string_new (NULL);
  t->text = g_string_new (NULL);
  t->starts = g_array_new (FALSE, FALSE, sizeof (gsize));
  t->parser = json_parser_new_immutable ();
  return t;
}

void
shoal_tail_free (ShoalTail *t)
{
  if (t == NULL)
    return;
  if (t->fd >= 0)
    close (t->fd);
  g_free (t->path);
  g_string_free (t->partial, TRUE);
  g_string_free (t->text, TRUE);
  g_array_free (t->starts, TRUE);
  g_object_unref (t->parser);
  g_free (t);
}

static void
restart (ShoalTail *t)
{
  if (t->fd >= 0)
    close (t->fd);
  t->fd = -1;
  t->offset = 0;
  g_string_truncate (t->partial, 0);
  g_string_truncate (t->text, 0);
  g_array_set_size (t->starts, 0);
  t->damaged = 0;
  t->generation++;
}

/* A finished line: kept when it is a JSON object. */
static gboolean
take_line (ShoalTail *t, const char *line, gsize len)
{
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
    len--;
  if (len == 0)
    return FALSE;   /* a blank line is no record, and no damage either */
  JsonNode *root = NULL;
  if (json_parser_load_from_data (t->parser, line, (gssize) len, NULL))
    root = json_parser_get_root (t->parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      t->damaged++;
      return FALSE;
    }
  gsize start = t->text->len;
  g_array_append_val (t->starts, start);
  g_string_append_len (t->text, line, (gssize) len);
  g_string_append_c (t->text, '\n');
  return TRUE;
}

guint
shoal_tail_poll (ShoalTail *t)
{
  struct stat by_path;
  if (stat (t->path, &by_path) != 0 || !S_ISREG (by_path.st_mode))
    {
      if (t->fd >= 0 || t->starts->len > 0)
        restart (t);
      return 0;
    }
  if (t->fd >= 0 && (by_path.st_dev != t->dev || by_path.st_ino != t->ino || by_path.st_size < t->offset))
    restart (t);
  if (t->fd < 0)
    {
      /* O_NOFOLLOW: the run's folder was checked, a link in it is not followed */
      t->fd = open (t->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
      if (t->fd < 0)
        return 0;
      struct stat st;
      if (fstat (t->fd, &st) != 0 || !S_ISREG (st.st_mode))
        {
          close (t->fd);
          t->fd = -1;
          return 0;
        }
      t->dev = st.st_dev;
      t->ino = st.st_ino;
    }
  if (by_path.st_size <= t->offset)
    return 0;

  gsize want = (gsize) MIN (by_path.st_size - t->offset, (goffset) POLL_READ_MAX);
  char *buf = g_malloc (want);
  ssize_t got = pread (t->fd, buf, want, t->offset);
  if (got <= 0)
    {
      g_free (buf);
      return 0;
    }
  t->offset += got;
  guint added = 0;
  const char *p = buf, *end = buf + got;
  while (p < end)
    {
      const char *nl = memchr (p, '\n', (gsize) (end - p));
      if (nl == NULL)
        {
          g_string_append_len (t->partial, p, end - p);
          break;
        }
      if (t->partial->len > 0)
        {
          g_string_append_len (t->partial, p, nl - p);
          added += take_line (t, t->partial->str, t->partial->len);
          g_string_truncate (t->partial, 0);
        }
      else
        added += take_line (t, p, (gsize) (nl - p));
      p = nl + 1;
    }
  g_free (buf);
  return added;
}

guint
shoal_tail_lines (const ShoalTail *t)
{
  return t->starts->len;
}

guint
shoal_tail_damaged (const ShoalTail *t)
{
  return t->damaged;
}

guint
shoal_tail_generation (const ShoalTail *t)
{
  return t->generation;
}

void
shoal_tail_append_json (const ShoalTail *t, guint from, guint to, GString *out)
{
  to = MIN (to, t->starts->len);
  for (guint i = from; i < to; i++)
    {
      gsize start = g_array_index (t->starts, gsize, i);
      gsize end = i + 1 < t->starts->len ? g_array_index (t->starts, gsize, i + 1) : t->text->len;
      if (i > from)
        g_string_append_c (out, ',');
      g_string_append_len (out, t->text->str + start, (gssize) (end - start - 1));
    }
}
