/*
 * auth — who may use /admin/: the admin token every /admin/ request
 * shows; enrollment, which lets a new executor_id be bound.
 */
#ifndef EK_DISPATCHER_AUTH_H
#define EK_DISPATCHER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "http.h"

/* Load the admin token from given, or from STORE.admin-token, making it
 * (0600) if absent; before the server starts.  0 or -1 with e filled. */
int auth_init(const char *store, const char *given, struct ek_err *e);
/* The admin token itself, from given or STORE.admin-token, for a client of
 * /admin/ (exec-dispatcher submit): never made, checked as auth_init()
 * checks it, into buf (size bytes; 258 hold any).  0 or -1. */
int auth_token_load(const char *store, const char *given, char *buf, size_t size,
    struct ek_err *e);
/* 0 if rq shows the admin token, else 401/403 with the answer set. */
int auth_admin(struct req *rq);
/* Inside the negotiation's transaction: spend one use of the enrollment
 * token (NULL: none sent) to enroll executor xid; 0, or 403/500 (answer
 * set). */
int enroll_take(struct req *rq, const char *xid, const char *token);
/* Are two SHA-256 hex digests equal?  In constant time. */
bool digest_eq(const char *got, const char *want);

handler_fn h_enroll_new;

#endif
