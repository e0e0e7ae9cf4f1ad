/*
 * metrics — the operator's figures (inspect.h: inspect_figures) as
 * Prometheus metrics, for `exec-inspect metrics` and node_exporter's
 * textfile collector (written with file.h: file_write_atomic).
 * `exec-inspect summary --json` prints the summary's figures; doc/json.md
 * (record summary) maps each JSON field to its metric.  The counters
 * (*_total), the run-duration histogram, the session's gauges and the two
 * oldest results' times come from counters.h; contrib/ has a dashboard
 * and alert rules built on them.
 */
#ifndef EK_METRICS_H
#define EK_METRICS_H

#include "inspect.h"

/* The figures in the Prometheus text exposition format (0.0.4): every
 * metric named execkit_*, each with its HELP and TYPE lines, every series
 * labelled executor="executor_id".  A new string for free(), NULL when out
 * of memory. */
char *inspect_metrics_text(const struct inspect_figures *f, const char *executor_id);

#endif
