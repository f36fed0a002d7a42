/* The backends built into this library, "cpu" first (the default of a forward). */
#include <string.h>

#include "backend/backend.h"

static const dz_backend *registered(int i) {
    switch (i) {
    case 0: return dz_backend_cpu();
    case 1: return dz_backend_ref();
    default: return NULL;
    }
}

int dz_backend_count(void) { return 2; }

const dz_backend *dz_backend_at(int i) { return i >= 0 && i < dz_backend_count() ? registered(i) : NULL; }

const dz_backend *dz_backend_by_name(const char *name) {
    for (int i = 0; name && i < dz_backend_count(); i++)
        if (strcmp(registered(i)->name, name) == 0) return registered(i);
    return NULL;
}
