/* Names of cuvil_status values. */
#include "cuvil/cuvil.h"

/* keep in ORDER with enum cuvil_status in include/cuvil/cuvil_model.h */
static const char *const cuvil_status_names[] = {
    "ok", "invalid argument", "malformed model", "unsupported", "shape mismatch",
    "dtype mismatch", "out of memory", "I/O error", "C toolchain failed", "internal error",
};

const char *cuvil_status_str(cuvil_status s) {
    if ((unsigned)s < sizeof cuvil_status_names / sizeof cuvil_status_names[0])
        return cuvil_status_names[s];
    return "unknown status";
}
