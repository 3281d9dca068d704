# GPU allocation % against arrived workload % on the default trace, one line per policy (the FGD
# paper's Fig. 9a), from the curves gapless-bench --curves writes.
#   gnuplot -e "curves='bench/results/curves'; out='alloc.png'" bench/plots/allocation.gp
load dir."style.gp"
set output out
set datafile separator ","
set title "Default trace: GPU allocation as the workload arrives (mean of 10 seeds)"
set xlabel "arrived GPU workload (% of cluster GPU capacity)"
set ylabel "GPU allocation (% of 6,212 GPUs)"
set xrange [75:130]
set yrange [75:100]
set xtics 5
set ytics 5
set key outside right center vertical box opaque samplen 2 spacing 1.1
set arrow from 100, graph 0 to 100, graph 1 nohead dt 3 lc rgb "#888888"
plot [x=75:130] (x < 100 ? x : 100) with lines dt 2 lw 1.5 lc rgb "#444444" title "ideal", \
     for [i=1:7] sprintf("%s/default_%s.csv", curves, policy[i]) \
       using 1:(100 - $2) skip 1 with lines lw 2 lc rgb colour[i] title label[i]
