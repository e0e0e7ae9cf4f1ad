/*
 * admin — /admin/, the operator's: runs, summary, sessions, clients,
 * faults, stats.
 */
#ifndef EK_DISPATCHER_ADMIN_H
#define EK_DISPATCHER_ADMIN_H

#include "http.h"

handler_fn h_submit, h_list_runs, h_show_run, h_summary, h_revoke, h_expire, h_replace,
	h_lease, h_stats, h_list_sessions, h_client_new, h_list_clients, h_client_revoke, h_add_fault,
	h_clear_faults;

#endif
