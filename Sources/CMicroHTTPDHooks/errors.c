#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "CMicroHTTPDHooks.h"
#include "next_symbol.h"

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

/* Entries are only ever appended, each published by the release store of body_count, and never
 * changed or freed: a response being sent still points at its body, and daemons started later
 * (several servers in one process, as in the tests) read the table while it grows. The first
 * body registered for a status stays. */
enum { MAX_BODIES = 32 };
static struct { unsigned int status; char *body; size_t length; } bodies[MAX_BODIES];
static int body_count = 0;
static pthread_mutex_t registering = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int queueing_own = 0;

void herald_set_error_body(unsigned int status, const char *body, size_t length) {
    pthread_mutex_lock(&registering);
    int count = __atomic_load_n(&body_count, __ATOMIC_ACQUIRE);
    int known = 0;
    for (int i = 0; i < count; i++) { if (bodies[i].status == status) { known = 1; break; } }
    char *copy = (known || count == MAX_BODIES) ? NULL : malloc(length);
    if (copy != NULL) {
        memcpy(copy, body, length);
        bodies[count].status = status;
        bodies[count].body = copy;
        bodies[count].length = length;
        __atomic_store_n(&body_count, count + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registering);
}

static queue_fn real_queue(void) {
    static void *real = NULL;
    return (queue_fn)herald_next_symbol(&real, "MHD_queue_response");
}

enum MHD_Result herald_queue_response(struct MHD_Connection *connection, unsigned int status,
                                      struct MHD_Response *response) {
    queueing_own = 1;
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    queueing_own = 0;
    return result;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status,
                                   struct MHD_Response *response) {
    queue_fn real = real_queue();
    if (real == NULL) return MHD_NO;
    if (queueing_own || status < 400) return real(connection, status, response);
    unsigned int fallback = status < 500 ? 0 : 1;
    int chosen = -1;
    int count = __atomic_load_n(&body_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < count; i++) {
        if (bodies[i].status == status) { chosen = i; break; }
        if (bodies[i].status == fallback) chosen = i;
    }
    if (chosen < 0) return real(connection, status, response);
    struct MHD_Response *json = MHD_create_response_from_buffer(bodies[chosen].length, bodies[chosen].body,
                                                                MHD_RESPMEM_PERSISTENT);
    if (json == NULL) return real(connection, status, response);
    MHD_add_response_header(json, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(json, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result result = real(connection, status, json);
    MHD_destroy_response(json);
    return result;
}
