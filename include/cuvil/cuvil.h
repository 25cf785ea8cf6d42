/*
 * cuvil.h -- the Cuvil compiler API (placeholder; filled in by the compiler work).
 */
#ifndef CUVIL_H
#define CUVIL_H
#include "cuvil/cuvil_model.h"
#ifdef __cplusplus
extern "C" {
#endif
const char *cuvil_status_str(cuvil_status s);
#ifdef __cplusplus
}
#endif
#endif
