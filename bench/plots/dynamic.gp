# The dynamic replay on the default trace: GPU allocation % (top) and pods waiting (bottom) over
# time, one line per policy (mean over seeds), from gapless-bench --dynamic --curves. The curves
# run to twice the last arrival's time; the plot starts where the arrivals bunch up.
#   gnuplot -e "dir='bench/plots/'; curves='bench/results/curves'; out='d.png'" bench/plots/dynamic.gp
load dir."style.gp"
set terminal pngcairo size 900,640 font "DejaVu Sans,11" noenhanced
set output out
set datafile separator ","
array dpolicy[4] = ["bestfit", "fgd", "gapless", "default.yaml"]
array dlabel[4] = ["BestFit", "FGD", "gapless", "policies/default.yaml"]
array dcolour[4] = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd"]
file(i) = sprintf("%s/default_%s_dynamic.csv", curves, dpolicy[i])
stats file(1) using 1 nooutput
tmax = STATS_max
tlast = tmax / 2
set xrange [0.6 * tlast : tmax]
set arrow 1 from tlast, graph 0 to tlast, graph 1 nohead dt 3 lc rgb "#888888"
set key outside right center vertical box samplen 2 spacing 1.1
set lmargin at screen 0.09
set rmargin at screen 0.72
set multiplot layout 2,1 title "Dynamic replay, default trace (mean of 10 seeds; dotted: last arrival)"
set ylabel "GPU allocation %"
set yrange [0:100]
set format x ""
set bmargin 1
plot for [i=1:4] file(i) using 1:3 skip 1 with lines lw 2 lc rgb dcolour[i] title dlabel[i]
set ylabel "pods waiting"
set yrange [0:*]
unset key
set format x "%g"
set xlabel "replay time (s): arrivals at creation_time / speedup, lifetimes unscaled"
set bmargin
set tmargin 1
plot for [i=1:4] file(i) using 1:5 skip 1 with lines lw 2 lc rgb dcolour[i] title dlabel[i]
unset multiplot
