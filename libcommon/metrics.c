/*
 * metrics — see metrics.h.
 *
 * One table names every metric, its type, its help text and its series,
 * and the text is written from it in table order: a new figure is an enum
 * fig value, a row of the table and a case of fig_value().  The counters
 * (*_total) and the run-duration histogram come from the counters table
 * (schema/011, 013) through counters.h.  Every series carries the
 * executor's id as its label executor, so that two executors on one node
 * (two textfiles) never collide.  Times are timestamps, never ages: an
 * age written by a writer that stopped would freeze and look fresh, where
 * a timestamp shows its staleness to time() in the alert rules.
 */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "metrics.h"

/*
 * The metrics, in the order they are written.  A family's series are its
 * label values (NULL: one series without labels); fig_value() reads each.
 */
enum fig { F_QUEUED, F_RUNNING, F_QUAR_QUEUED, F_QUAR_STARTED, F_UNKNOWN, F_DELIVERABLE,
	F_EARLIER, F_REFUSED, F_ATTEMPTS, F_RECEIPTS, F_OLDEST, F_OLDEST_REFUSED, F_HB_ACKED,
	F_HB_PENDING, F_OUT_FILES, F_OUT_BYTES, F_UP, F_BEAT, F_WRITTEN, F_BUILD,
	F_FINISHED,   /* + an index into counter_outcomes */
	F_TOTAL = F_FINISHED + C_OUTCOMES   /* + an enum counter */
};

#define SERIES_MAX C_OUTCOMES

static const struct metric {
	const char *name, *type, *help, *label;
	struct { const char *value; int fig; } series[SERIES_MAX];
} metrics[] = {
	{ "execkit_runs_queued", "gauge", "Runs of the current session accepted and waiting to start.",
	    NULL, { { NULL, F_QUEUED } } },
	{ "execkit_runs_running", "gauge", "Runs of the current session started and without a result yet.",
	    NULL, { { NULL, F_RUNNING } } },
	{ "execkit_runs_quarantined", "gauge", "Runs accepted under another binding: never started, "
	    "never deleted here.", "state", { { "queued", F_QUAR_QUEUED }, { "started", F_QUAR_STARTED } } },
	{ "execkit_runs_unknown", "gauge", "Runs whose supervisor vanished before choosing a result "
	    "(outcome unknown, never re-run).", NULL, { { NULL, F_UNKNOWN } } },
	{ "execkit_unreconciled_results", "gauge", "Retained results not acknowledged yet, by cause.",
	    "cause", { { "deliverable", F_DELIVERABLE }, { "earlier_session", F_EARLIER },
	    { "refused", F_REFUSED } } },
	{ "execkit_unreconciled_attempts", "gauge", "Delivery attempts spent on the retained results "
	    "(sum over them).", NULL, { { NULL, F_ATTEMPTS } } },
	{ "execkit_oldest_unreconciled_timestamp_seconds", "gauge", "When the oldest retained result "
	    "not refused was chosen (Unix time); 0 when none. Refused evidence has its own gauge.",
	    NULL, { { NULL, F_OLDEST } } },
	{ "execkit_oldest_refused_timestamp_seconds", "gauge", "When the oldest refused result kept "
	    "as evidence until exported was chosen (Unix time); 0 when none.", NULL,
	    { { NULL, F_OLDEST_REFUSED } } },
	{ "execkit_receipts", "gauge", "Receipts of acknowledged results kept until pruned.",
	    NULL, { { NULL, F_RECEIPTS } } },
	{ "execkit_runs_handed_back", "gauge", "Runs never started here and handed back to the "
	    "dispatcher on a clean stop, by whether it acknowledged them.", "state",
	    { { "acknowledged", F_HB_ACKED }, { "pending", F_HB_PENDING } } },
	{ "execkit_output_files", "gauge", "Captured output files (stdout, stderr, notify) held in "
	    "the state directory.", NULL, { { NULL, F_OUT_FILES } } },
	{ "execkit_output_bytes", "gauge", "Bytes of captured output held in the state directory.",
	    NULL, { { NULL, F_OUT_BYTES } } },
	{ "execkit_session_up", "gauge", "1 while this executor has a current session, else 0.",
	    NULL, { { NULL, F_UP } } },
	{ "execkit_last_heartbeat_timestamp_seconds", "gauge", "The last good heartbeat (or the open) "
	    "of the current session, else of the latest one (Unix time); 0 before any session.",
	    NULL, { { NULL, F_BEAT } } },
	{ "execkit_metrics_timestamp_seconds", "gauge", "When these figures were read (Unix time): a "
	    "textfile that stops being rewritten shows it here.", NULL, { { NULL, F_WRITTEN } } },
	{ "execkit_build_info", "gauge", "The execkit version reading this state; always 1.",
	    "version", { { PACKAGE_VERSION, F_BUILD } } },
	{ "execkit_runs_accepted_total", "counter", "Runs accepted.", NULL, { { NULL, F_TOTAL + C_ACCEPTED } } },
	{ "execkit_runs_started_total", "counter", "Runs started.", NULL, { { NULL, F_TOTAL + C_STARTED } } },
	{ "execkit_runs_finished_total", "counter", "Runs finished, by outcome (unknown: the "
	    "supervisor vanished before choosing a result).", "outcome",
	    { { "exited", F_FINISHED }, { "killed", F_FINISHED + 1 }, { "timeout", F_FINISHED + 2 },
	    { "cancelled", F_FINISHED + 3 }, { "exec_failed", F_FINISHED + 4 }, { "unknown", F_FINISHED + 5 } } },
	{ "execkit_results_delivered_total", "counter", "Results acknowledged by the dispatcher.",
	    NULL, { { NULL, F_TOTAL + C_DELIVERED } } },
	{ "execkit_results_refused_total", "counter", "Results the dispatcher refused for good "
	    "(kept here as evidence).", NULL, { { NULL, F_TOTAL + C_REFUSED } } },
	{ "execkit_delivery_attempts_total", "counter", "Delivery attempts begun.",
	    NULL, { { NULL, F_TOTAL + C_ATTEMPTS } } },
	{ "execkit_reconcile_passes_total", "counter", "exec-reconcile passes that selected at "
	    "least one retained result.", NULL, { { NULL, F_TOTAL + C_PASSES } } },
};

/* A wall-clock time in ms as Unix seconds. */
static double
unix_s(int64_t ms)
{
	return (double)ms / 1000.0;
}

static double
fig_value(const struct inspect_figures *f, int which)
{
	const struct summary *s = &f->s;

	if (which >= F_TOTAL)
		return (double)f->c.total[which - F_TOTAL];
	if (which >= F_FINISHED)
		return (double)f->c.finished[which - F_FINISHED];
	switch ((enum fig)which) {
	case F_QUEUED: return (double)s->queued;
	case F_RUNNING: return (double)s->started;
	case F_QUAR_QUEUED: return (double)s->quarantined_queued;
	case F_QUAR_STARTED: return (double)s->quarantined_started;
	case F_UNKNOWN: return (double)s->unknown;
	case F_DELIVERABLE: return (double)s->deliverable;
	case F_EARLIER: return (double)s->earlier_session;
	case F_REFUSED: return (double)s->refused;
	case F_ATTEMPTS: return (double)f->s.attempts;
	case F_RECEIPTS: return (double)s->receipts;
	case F_HB_ACKED: return (double)s->handed_back;
	case F_HB_PENDING: return (double)s->handing_back;
	case F_OUT_FILES: return (double)f->output_files;
	case F_OUT_BYTES: return (double)f->output_bytes;
	case F_OLDEST: return unix_s(f->c.oldest_unrefused_ms);
	case F_OLDEST_REFUSED: return unix_s(f->c.oldest_refused_ms);
	case F_UP: return f->c.session_up ? 1.0 : 0.0;
	case F_BEAT: return unix_s(f->c.last_good_ms);
	case F_WRITTEN: return unix_s(f->read_at_ms);
	case F_BUILD: return 1.0;
	default: break;
	}
	return 0.0;
}

/* One sample of family name (suffix added: the histogram's _bucket, _sum,
 * _count), labelled executor="id" and, when label is set, label="value". */
static void
sample(FILE *m, const char *name, const char *suffix, const char *id, const char *label,
    const char *value, double v)
{
	fprintf(m, "%s%s{executor=\"%s\"", name, suffix, id);
	if (label)
		fprintf(m, ",%s=\"%s\"", label, value);
	fprintf(m, "} %.15g\n", v);
}

/* The run-duration histogram (counters.h), in seconds. */
static void
duration_histogram(FILE *m, const struct counters *c, const char *id)
{
	static const char name[] = "execkit_run_duration_seconds";
	int i;

	fprintf(m, "# HELP %s Runs by how long their guest ran (start marker to chosen result).\n"
	    "# TYPE %s histogram\n", name, name);
	for (i = 0; i < C_DURATION_BUCKETS; i++)
		sample(m, name, "_bucket", id, "le", duration_buckets[i], (double)c->duration_le[i]);
	sample(m, name, "_sum", id, NULL, NULL, (double)c->duration_sum_ms / 1000.0);
	sample(m, name, "_count", id, NULL, NULL, (double)c->duration_count);
}

char *
inspect_metrics_text(const struct inspect_figures *f, const char *executor_id)
{
	char *text = NULL;
	size_t len = 0, i, j;
	FILE *m = open_memstream(&text, &len);

	if (!m)
		return NULL;
	for (i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
		const struct metric *x = &metrics[i];

		fprintf(m, "# HELP %s %s\n# TYPE %s %s\n", x->name, x->help, x->name, x->type);
		for (j = 0; j < SERIES_MAX && (j == 0 || x->series[j].value); j++)
			sample(m, x->name, "", executor_id, x->label, x->series[j].value,
			    fig_value(f, x->series[j].fig));
	}
	duration_histogram(m, &f->c, executor_id);
	if (fclose(m) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
