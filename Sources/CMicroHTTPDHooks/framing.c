#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "CMicroHTTPDHooks.h"
#include "next_symbol.h"

/*
 * A chunked body's declared size, seen as libmicrohttpd reads it.
 *
 * libmicrohttpd 0.9.75 parses a chunk-size line and then waits for the chunk's bytes; it answers
 * 413 only when the size does not fit in 64 bits, and it tells the application nothing until
 * bytes of the chunk arrive. So `ffffffffffffffff` followed by silence held a connection until
 * the body deadline. This file follows the bytes libmicrohttpd receives on each of its
 * connections (it defines `recv`, which the library calls through its PLT, as errors.c defines
 * MHD_queue_response) with a framing tracker that mirrors the library's own rules: request heads
 * by lines ending in LF or CRLF, empty lines before a request line skipped, Content-Length and
 * `Transfer-Encoding: chunked` from the head, then the chunks, their CRLF or LF and the trailer.
 *
 * The tracker never frames a request: libmicrohttpd does. It acts in one case only, when the
 * chunk sizes declared so far in a request add up to more than the body limit: from that digit
 * on, the bytes handed to the library are replaced by the chunk size `10000000000000000` (2^64,
 * one more than 64 bits hold, whatever digits came before it) and CRLF, so the library answers
 * its own 413 at once and closes the connection (through MHD_queue_response, in JSON). Whenever
 * the bytes are not what it understands (a folded or repeated framing header, a NUL in a head
 * line, a malformed chunk, conflicting lengths: all of which libmicrohttpd or Herald refuse and
 * close), it stops following the connection and passes its bytes through untouched. A connection
 * it does not follow behaves exactly as without it.
 *
 * Connections are registered by fd (herald_track_connection, from libmicrohttpd's connection
 * notification, before the library reads from the socket) and removed before the library closes
 * the fd, so an fd number reused later by libpq or libcurl is not followed. Each connection is
 * read by the one thread that owns it in the pool, so its state needs no lock; the table of
 * connections is read and written atomically.
 */

enum { TABLE_SIZE = 65536, LINE_KEEP = 96 };

/* 2^64 in hex: 17 digits, one more than a uint64_t holds. */
static const char OVERFLOW_SIZE[] = "10000000000000000\r\n";

enum phase {
    REQUEST_LINE,   /* a request line, or an empty line before one */
    HEAD,           /* header lines up to the empty line */
    BODY,           /* `remaining` bytes of a Content-Length body */
    CHUNK_SIZE,     /* hex digits of a chunk size */
    CHUNK_SIZE_CR,  /* a CR after the digits: LF must follow */
    CHUNK_EXT,      /* a chunk extension, up to LF */
    CHUNK_DATA,     /* `remaining` bytes of a chunk */
    CHUNK_END,      /* the CRLF or LF after a chunk's data */
    CHUNK_END_CR,   /* a CR after a chunk's data: LF must follow */
    TRAILER,        /* trailer lines up to the empty line */
    UNFOLLOWED,     /* not understood, or tripped: bytes pass through */
};

struct tracker {
    uint64_t limit;
    enum phase phase;
    /* The current head or trailer line: its first LINE_KEEP bytes and its length. */
    char line[LINE_KEEP];
    size_t line_length;
    char line_last;
    bool line_has_nul;
    /* The head so far. */
    unsigned lengths, encodings;
    uint64_t content_length;
    bool chunked, last_was_framing;
    /* The body so far. */
    uint64_t remaining, declared, size;
    bool size_has_digits;
    /* The part of OVERFLOW_SIZE still to hand over after a trip. */
    size_t pending_offset, pending_length;
};

static struct tracker *table[TABLE_SIZE];

typedef ssize_t (*recv_fn)(int, void *, size_t, int);

static recv_fn real_recv(void) {
    static void *real = NULL;
    return (recv_fn)herald_next_symbol(&real, "recv");
}

void herald_track_connection(int fd, uint64_t body_limit) {
    if (fd < 0 || fd >= TABLE_SIZE) return;
    struct tracker *tracker = calloc(1, sizeof *tracker);
    if (tracker == NULL) return;
    tracker->limit = body_limit;
    tracker->phase = REQUEST_LINE;
    struct tracker *old = __atomic_exchange_n(&table[fd], tracker, __ATOMIC_ACQ_REL);
    free(old);
}

void herald_untrack_connection(int fd) {
    if (fd < 0 || fd >= TABLE_SIZE) return;
    free(__atomic_exchange_n(&table[fd], NULL, __ATOMIC_ACQ_REL));
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Whether the kept line starts with `name` and a colon, in any case (libmicrohttpd's key is the
 * text before the first colon, compared without case). */
static bool line_names(const struct tracker *t, const char *name, const char **value) {
    size_t n = strlen(name);
    size_t kept = t->line_length < LINE_KEEP ? t->line_length : LINE_KEEP;
    if (kept <= n || t->line[n] != ':' || strncasecmp(t->line, name, n) != 0) return false;
    *value = t->line + n + 1;
    return true;
}

/* The end of a head line (without its CR and LF). */
static void head_line(struct tracker *t) {
    if (t->phase == REQUEST_LINE) {
        if (t->line_length == 0) return;
        t->phase = HEAD;
        t->lengths = t->encodings = 0;
        t->content_length = 0;
        t->chunked = t->last_was_framing = false;
        return;
    }
    if (t->line_length == 0) {
        /* The head is complete. Herald refuses any framing but one Content-Length value or one
         * `Transfer-Encoding: chunked`, and closes the connection. */
        if (t->encodings > 0) {
            if (t->encodings == 1 && t->chunked && t->lengths == 0) {
                t->phase = CHUNK_SIZE;
                t->declared = t->size = 0;
                t->size_has_digits = false;
            } else {
                t->phase = UNFOLLOWED;
            }
        } else if (t->lengths > 0 && t->content_length > 0) {
            t->phase = BODY;
            t->remaining = t->content_length;
        } else {
            t->phase = REQUEST_LINE;
        }
        return;
    }
    if (t->line[0] == ' ' || t->line[0] == '\t') {
        /* A folded line continues the previous header's value. */
        if (t->last_was_framing) t->phase = UNFOLLOWED;
        return;
    }
    if (t->line_has_nul) { t->phase = UNFOLLOWED; return; }
    const char *value;
    bool length = line_names(t, "content-length", &value);
    bool encoding = !length && line_names(t, "transfer-encoding", &value);
    t->last_was_framing = length || encoding;
    if (!length && !encoding) return;
    if (t->line_length > LINE_KEEP) { t->phase = UNFOLLOWED; return; }
    const char *end = t->line + t->line_length;
    while (value < end && (*value == ' ' || *value == '\t')) value++;
    if (encoding) {
        t->encodings++;
        t->chunked = (size_t)(end - value) == 7 && strncasecmp(value, "chunked", 7) == 0;
        return;
    }
    uint64_t parsed = 0;
    if (value == end || end - value > 19) { t->phase = UNFOLLOWED; return; }
    for (const char *c = value; c < end; c++) {
        if (*c < '0' || *c > '9') { t->phase = UNFOLLOWED; return; }
        parsed = parsed * 10 + (uint64_t)(*c - '0');
    }
    if (t->lengths > 0 && parsed != t->content_length) { t->phase = UNFOLLOWED; return; }
    t->lengths++;
    t->content_length = parsed;
}

/* The end of a trailer line. */
static void trailer_line(struct tracker *t) {
    if (t->line_length == 0) t->phase = REQUEST_LINE;
}

/* Follows `count` bytes; returns the index of the digit at which the declared chunk sizes pass
 * the limit, or `count` when they do not. */
static size_t follow(struct tracker *t, const char *bytes, size_t count) {
    size_t i = 0;
    while (i < count) {
        switch (t->phase) {
        case REQUEST_LINE:
        case HEAD:
        case TRAILER: {
            const char *newline = memchr(bytes + i, '\n', count - i);
            size_t stop = newline ? (size_t)(newline - bytes) : count;
            for (size_t j = i; j < stop; j++) {
                if (t->line_length < LINE_KEEP) t->line[t->line_length] = bytes[j];
                if (bytes[j] == '\0') t->line_has_nul = true;
                t->line_last = bytes[j];
                t->line_length++;
            }
            i = stop;
            if (newline == NULL) break;
            i++;
            /* A CR just before the LF ends the line with it. */
            if (t->line_length > 0 && t->line_last == '\r') t->line_length--;
            if (t->phase == TRAILER) trailer_line(t); else head_line(t);
            t->line_length = 0;
            t->line_last = 0;
            t->line_has_nul = false;
            break;
        }
        case BODY:
        case CHUNK_DATA: {
            uint64_t left = count - i;
            uint64_t take = t->remaining < left ? t->remaining : left;
            t->remaining -= take;
            i += (size_t)take;
            if (t->remaining == 0) t->phase = t->phase == BODY ? REQUEST_LINE : CHUNK_END;
            break;
        }
        case CHUNK_SIZE: {
            char c = bytes[i];
            int digit = hex_value(c);
            if (digit >= 0) {
                t->size_has_digits = true;
                /* size * 16 + digit > room, without overflowing (declared never passes the limit). */
                uint64_t room = t->limit - t->declared;
                if ((uint64_t)digit > room || t->size > (room - (uint64_t)digit) / 16) return i;
                t->size = t->size * 16 + (uint64_t)digit;
                i++;
                break;
            }
            if (!t->size_has_digits || (c != ';' && c != '\r' && c != '\n')) { t->phase = UNFOLLOWED; break; }
            i++;
            if (c == ';') { t->phase = CHUNK_EXT; break; }
            if (c == '\r') { t->phase = CHUNK_SIZE_CR; break; }
            goto size_done;
        }
        case CHUNK_SIZE_CR:
            if (bytes[i] != '\n') { t->phase = UNFOLLOWED; break; }
            i++;
            goto size_done;
        case CHUNK_EXT: {
            const char *newline = memchr(bytes + i, '\n', count - i);
            if (newline == NULL) { i = count; break; }
            i = (size_t)(newline - bytes) + 1;
            goto size_done;
        }
        size_done:
            t->declared += t->size;
            if (t->size == 0) {
                t->phase = TRAILER;
                t->line_length = 0;
                t->line_last = 0;
                t->line_has_nul = false;
            } else {
                t->phase = CHUNK_DATA;
                t->remaining = t->size;
            }
            t->size = 0;
            t->size_has_digits = false;
            break;
        case CHUNK_END:
        case CHUNK_END_CR: {
            char c = bytes[i];
            if (c == '\n') { t->phase = CHUNK_SIZE; i++; break; }
            if (c == '\r' && t->phase == CHUNK_END) { t->phase = CHUNK_END_CR; i++; break; }
            t->phase = UNFOLLOWED;
            break;
        }
        case UNFOLLOWED:
            return count;
        }
    }
    return count;
}

/* Hands over what is left of OVERFLOW_SIZE, up to `room` bytes at `out`. */
static size_t hand_over(struct tracker *t, char *out, size_t room) {
    size_t n = t->pending_length < room ? t->pending_length : room;
    memcpy(out, OVERFLOW_SIZE + t->pending_offset, n);
    t->pending_offset += n;
    t->pending_length -= n;
    return n;
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    recv_fn real = real_recv();
    struct tracker *t = (fd >= 0 && fd < TABLE_SIZE) ? __atomic_load_n(&table[fd], __ATOMIC_ACQUIRE) : NULL;
    if (t == NULL || (flags & MSG_PEEK) || length == 0) return real(fd, buffer, length, flags);
    if (t->pending_length > 0) return (ssize_t)hand_over(t, buffer, length);
    ssize_t received = real(fd, buffer, length, flags);
    if (received <= 0 || t->phase == UNFOLLOWED) return received;
    size_t trip = follow(t, buffer, (size_t)received);
    if (trip == (size_t)received) return received;
    /* The declared body passed the limit at byte `trip`: the library gets the bytes before it,
     * then the overflowing size. When that does not fit, the read fills the buffer (so the
     * library reads again at once) and the rest comes with the next read. */
    t->phase = UNFOLLOWED;
    t->pending_offset = 0;
    t->pending_length = sizeof OVERFLOW_SIZE - 1;
    return (ssize_t)(trip + hand_over(t, (char *)buffer + trip, length - trip));
}
