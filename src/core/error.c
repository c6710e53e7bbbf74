#include "core/error.h"

G_DEFINE_QUARK (shoal-error-quark, shoal_error)
