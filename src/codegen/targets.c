/* targets.c -- the target table (targets.inc), as the compiler reads it. */
#include "codegen/codegen_int.h"

#include <string.h>

static const cuvil_target_info targets[] = {
#define CUVIL_TARGET(name, arch, cflags, kernels, features, mr, nr, mc, kc, nc, direct) \
    {name, arch, cflags, kernels, features, mr, nr, mc, kc, nc, direct},
#include "codegen/targets.inc"
#undef CUVIL_TARGET
};

const cuvil_target_info *cuvil_target_find(const char *name) {
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (name && !strcmp(targets[i].name, name)) return &targets[i];
    return NULL;
}

const char *cuvil_target_names(void) {
    static char buf[256];
    if (!buf[0])
        for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "", targets[i].name);
    return buf;
}
