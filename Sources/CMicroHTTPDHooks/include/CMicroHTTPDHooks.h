#ifndef CMICROHTTPD_HOOKS_H
#define CMICROHTTPD_HOOKS_H
#include <stddef.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdarg.h>
#include <microhttpd.h>

/*
 * Hooks into libmicrohttpd where it has no option: errors.c (its own error pages) and framing.c
 * (chunk sizes).
 *
 * libmicrohttpd answers the requests it refuses itself (a URI or header block beyond its memory
 * limit, malformed chunking or Content-Length, an unsupported HTTP version) with built-in HTML
 * pages, and has no option to change them. Every one of those answers goes through
 * MHD_queue_response, called through the library's PLT, so this module defines
 * MHD_queue_response: the executable's definition comes first in the dynamic lookup, and the
 * library's own calls reach it. A response Herald queues itself (herald_queue_response) passes
 * through unchanged; any other is replaced by the JSON body registered for its status.
 */

/* Registers the JSON body for a status (0 = 4xx without a body of its own, 1 = 5xx likewise);
 * the bytes are copied. The first body of a status stays for the life of the process. Safe to
 * call while daemons run. */
void herald_set_error_body(unsigned int status, const char *body, size_t length);

/* Queues a response Herald built: it is sent as it is. */
enum MHD_Result herald_queue_response(struct MHD_Connection *connection, unsigned int status,
                                      struct MHD_Response *response);

/*
 * Follows the bytes libmicrohttpd reads from a connection (framing.c defines `recv`), so that a
 * chunked body whose declared chunk sizes pass `body_limit` is answered 413 at once instead of
 * waiting for the chunk. Call from the connection-started notification, before the library
 * reads from `fd`, and herald_untrack_connection from the closed notification, before it closes
 * `fd`. Fds of 65536 and above are not followed.
 */
void herald_track_connection(int fd, uint64_t body_limit);
void herald_untrack_connection(int fd);
#endif
