/*
 * metrics — see metrics.h.
 *
 * One table names every metric, its help text and its series, and the
 * text is written from it in table order: a new figure is an enum fig
 * value, a row of the table and a case of fig_value().
 */
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"

/*
 * The metrics, in the order they are written.  A family's series are its
 * label values (NULL: one series without labels); fig_value() reads each.
 */
enum fig { F_QUEUED, F_RUNNING, F_QUAR_QUEUED, F_QUAR_STARTED, F_UNKNOWN, F_DELIVERABLE,
	F_EARLIER, F_REFUSED, F_ATTEMPTS, F_RECEIPTS, F_AGE, F_HB_ACKED, F_HB_PENDING,
	F_OUT_FILES, F_OUT_BYTES };

static const struct metric {
	const char *name, *help, *label;
	struct { const char *value; enum fig fig; } series[3];
} metrics[] = {
	{ "execkit_runs_queued", "Runs of the current session accepted and waiting to start.",
	    NULL, { { NULL, F_QUEUED } } },
	{ "execkit_runs_running", "Runs of the current session started and without a result yet.",
	    NULL, { { NULL, F_RUNNING } } },
	{ "execkit_runs_quarantined", "Runs accepted under another binding: never started, "
	    "never deleted here.", "state", { { "queued", F_QUAR_QUEUED }, { "started", F_QUAR_STARTED } } },
	{ "execkit_runs_unknown", "Runs whose supervisor vanished before choosing a result "
	    "(outcome unknown, never re-run).", NULL, { { NULL, F_UNKNOWN } } },
	{ "execkit_unreconciled_results", "Retained results not acknowledged yet, by cause.",
	    "cause", { { "deliverable", F_DELIVERABLE }, { "earlier_session", F_EARLIER },
	    { "refused", F_REFUSED } } },
	{ "execkit_unreconciled_attempts", "Delivery attempts spent on the retained results "
	    "(sum over them).", NULL, { { NULL, F_ATTEMPTS } } },
	{ "execkit_oldest_unreconciled_age_seconds", "Age of the oldest retained result "
	    "(since its result was chosen); 0 when none is retained.", NULL, { { NULL, F_AGE } } },
	{ "execkit_receipts", "Receipts of acknowledged results kept until pruned.",
	    NULL, { { NULL, F_RECEIPTS } } },
	{ "execkit_runs_handed_back", "Runs never started here and handed back to the "
	    "dispatcher on a clean stop, by whether it acknowledged them.", "state",
	    { { "acknowledged", F_HB_ACKED }, { "pending", F_HB_PENDING } } },
	{ "execkit_output_files", "Captured output files (stdout, stderr, notify) held in "
	    "the state directory.", NULL, { { NULL, F_OUT_FILES } } },
	{ "execkit_output_bytes", "Bytes of captured output held in the state directory.",
	    NULL, { { NULL, F_OUT_BYTES } } },
};

static double
fig_value(const struct inspect_figures *f, enum fig which)
{
	const struct summary *s = &f->s;
	int64_t age;

	switch (which) {
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
	case F_AGE:
		age = s->oldest_unreconciled_ms ? f->read_at_ms - s->oldest_unreconciled_ms : 0;
		return age > 0 ? (double)age / 1000.0 : 0.0;
	}
	return 0.0;
}

char *
inspect_metrics_text(const struct inspect_figures *f)
{
	char *text = NULL;
	size_t len = 0, i, j;
	FILE *m = open_memstream(&text, &len);

	if (!m)
		return NULL;
	for (i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
		const struct metric *x = &metrics[i];

		fprintf(m, "# HELP %s %s\n# TYPE %s gauge\n", x->name, x->help, x->name);
		for (j = 0; j < 3 && (j == 0 || x->series[j].value); j++) {
			if (x->label)
				fprintf(m, "%s{%s=\"%s\"} %.15g\n", x->name, x->label, x->series[j].value,
				    fig_value(f, x->series[j].fig));
			else
				fprintf(m, "%s %.15g\n", x->name, fig_value(f, x->series[j].fig));
		}
	}
	if (fclose(m) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
