#ifndef HERALD_NEXT_SYMBOL_H
#define HERALD_NEXT_SYMBOL_H
#define _GNU_SOURCE
#include <dlfcn.h>

/* The definition of `name` that the one in this module hides (libmicrohttpd's, libc's), looked
 * up once into `*slot`; any thread may race to store the same address. */
static inline void *herald_next_symbol(void **slot, const char *name) {
    void *found = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (found == NULL) {
        found = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, found, __ATOMIC_RELEASE);
    }
    return found;
}
#endif
