# Unallocated GPU % at arrived = 100 % for one group of trace variants, one bar per policy (mean
# ± sd over seeds as error bars), with the FGD paper's published mean as a black bar across it.
#   gnuplot -e "data='g.dat'; out='g.png'; heading='...'; axis='...'" bench/plots/bars.gp
# data: one row per trace: index, trace name, then per policy of style.gp: mean, sd, published
# (NaN where the paper has none), then the LP's lower bound and the offline packing (NaN where
# not computed), drawn as lines across the trace's bars.
load dir."style.gp"
set output out
set title heading
set xlabel axis
set ylabel "unallocated GPU % at arrived = 100 %"
set style fill solid 0.85 border lc rgb "#333333"
bw = 0.11
set boxwidth bw
stats data using 1 nooutput
set xrange [STATS_min - 0.5 : STATS_max + 0.5]
set yrange [0:*]
set key outside right center vertical box samplen 1.5 spacing 1.1
set xtics scale 0
plot for [i=1:7] data using ($1 + (i - 4) * bw):(column(3 * i)):(column(3 * i + 1)) \
       with boxerrorbars lc rgb colour[i] lw 1 title label[i], \
     data using 1:(NaN):xticlabels(2) notitle, \
     for [i=1:6] data using ($1 + (i - 4) * bw):(column(3 * i + 2)):(bw / 2) with xerrorbars \
       pt -1 lw 2.5 lc rgb "#000000" title (i == 1 ? "published (FGD paper)" : ""), \
     data using 1:(column(24)):(3.6 * bw) with xerrorbars pt -1 lw 2 dt 2 lc rgb "#6a3d9a" \
       title "LP lower bound", \
     data using 1:(column(25)):(3.6 * bw) with xerrorbars pt -1 lw 2 dt 3 lc rgb "#17becf" \
       title "offline packing"
