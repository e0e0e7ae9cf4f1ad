/*
 * metrics — the operator's figures (inspect.h: inspect_figures) as
 * Prometheus metrics, for `exec-inspect metrics` and node_exporter's
 * textfile collector (written with file.h: file_write_atomic).
 * `exec-inspect summary --json` prints the same figures; doc/json.md
 * (record summary) maps each JSON field to its metric.
 */
#ifndef EK_METRICS_H
#define EK_METRICS_H

#include "inspect.h"

/* The figures in the Prometheus text exposition format (0.0.4): every
 * metric named execkit_*, each with its HELP and TYPE lines.  A new string
 * for free(), NULL when out of memory. */
char *inspect_metrics_text(const struct inspect_figures *f);

#endif
