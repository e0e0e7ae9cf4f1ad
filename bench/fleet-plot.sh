#!/bin/bash
# The fleet bench's picture (sourced by bench/fleet.sh): requests/s, in
# flight and the gate's limit, the results a commit, and the probe's
# heartbeat latency through steady state, outage and recovery, with and
# without the gate, from the data fleet.sh wrote to $DATA; a PNG with
# gnuplot when it is installed.
# shellcheck disable=SC2154 # the variables are fleet.sh's

fleet_plot() {
	if command -v gnuplot >/dev/null 2>&1; then
		term="pngcairo size 1100,1300 font 'sans,10'"
		gnuplot -e 'set terminal pngcairo' 2>/dev/null || term="png size 1100,1300"
		xs=$(fig gate x_steady)
		xk=$(fig gate x_kill)
		xmax=$(calc '%.0f' "($(fig gate x_done) > $(fig nogate x_done) ? $(fig gate x_done) : $(fig nogate x_done)) + 3")
		steady_g=$(fig gate steady_rate)
		cat >"$DATA/fleet.gp" <<GP
set terminal $term
set output '$PNG'
set multiplot layout 4,1 title "execkit fleet: $N executors (tick ${TICK}s, slots $SLOTS) through a ${OUTAGE_S}s dispatcher outage, $total retained results\\nno gate (--gate off) vs gate (--gate adaptive; caps --max-inflight $GATE --max-rate $MAX_RATE, 0: none; Retry-After 1 s + spread; jitter ${JITTER:-none} ms); x: seconds from the dispatcher's restart"
set grid
set lmargin 12
set rmargin 34
set key outside right top box
set xrange [$(calc '%.0f' "$xs - 2"):$xmax]
set style rect fc lt -1 fs solid 0.12 noborder
set object 1 rect from $xs, graph 0 to $(calc '%.2f' "$xk - $GAP"), graph 1 fc rgb '#2ca02c' behind
set object 2 rect from $(calc '%.2f' "$xk - $GAP"), graph 0 to $xk, graph 1 fc rgb '#7f7f7f' fs pattern 4 behind
set object 3 rect from $xk, graph 0 to 0, graph 1 fc rgb '#d62728' behind
set label 1 "steady (${STEADY_S} s)" at $(calc '%.2f' "$xs + 0.5"), graph 0.93 front
set label 2 "retain (cut out)" at $(calc '%.2f' "$xk - $GAP / 2"), graph 0.5 center rotate by 90 front
set label 3 "outage (${OUTAGE_S} s)" at $(calc '%.2f' "$xk / 2"), graph 0.5 center rotate by 90 front
set label 4 "recovery" at 1, graph 0.93 front
set arrow 1 from $(fig gate x_done), graph 0 to $(fig gate x_done), graph 1 nohead lc rgb '#1f77b4' dt 2
set arrow 2 from $(fig nogate x_done), graph 0 to $(fig nogate x_done), graph 1 nohead lc rgb '#ff7f0e' dt 2
set ylabel 'requests/s (fleet)'
set yrange [0:*]
plot '$DATA/fleet-nogate.dat' using 1:2 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#ff7f0e' title 'no gate', \\
     '$DATA/fleet-gate.dat' using 1:2 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#1f77b4' title 'gate', \\
     '$DATA/fleet-gate.dat' using 1:4 with lines lw 1 lc rgb '#1f77b4' dt 2 title 'gate: of which 429', \\
     $steady_g * 2 with lines dt 3 lw 1.5 lc rgb '#000000' title 'goal: 2 x steady'
unset label
set ylabel 'requests in flight (sampled 1/s)'
plot '$DATA/fleet-nogate.dat' using 1:3 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#ff7f0e' title 'no gate', \\
     '$DATA/fleet-gate.dat' using 1:3 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#1f77b4' title 'gate', \\
     '$DATA/fleet-gate.dat' using 1:6 with steps lw 1.5 lc rgb '#000000' dt 2 title 'gate: its limit'
set ylabel 'results a commit (mean, 1-s window)'
plot '$DATA/fleet-nogate.dat' using 1:7 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#ff7f0e' title 'no gate', \\
     '$DATA/fleet-gate.dat' using 1:7 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#1f77b4' title 'gate'
set ylabel 'probe heartbeat (ms, log)'
set logscale y
set yrange [*:*]
set xlabel "seconds from the restart (dashed lines: every result recorded; the steady window is moved to just before the retain phase, which is cut out)"
plot '$DATA/fleet-probe-nogate.dat' using 1:2 with points pt 7 ps 0.35 lc rgb '#ff7f0e' title 'no gate', \\
     '$DATA/fleet-probe-gate.dat' using 1:2 with points pt 7 ps 0.35 lc rgb '#1f77b4' title 'gate'
unset multiplot
GP
		gnuplot "$DATA/fleet.gp" 2>"$DATA/gnuplot.log" || say "gnuplot failed (see $DATA/gnuplot.log)"
		[ -s "$PNG" ] && say "picture: $PNG ($(($(stat -c %s "$PNG") / 1024)) KiB); data in $DATA"
	else
		say "note: no gnuplot (Debian: gnuplot-nox): no picture; data in $DATA"
	fi
}
