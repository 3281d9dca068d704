# Shared look of the bench plots: one colour per policy, in the order of bench/results/table.md.
set terminal pngcairo size 900,540 font "DejaVu Sans,11" noenhanced
array policy[7] = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "gapless"]
array label[7] = ["Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD", "gapless"]
array colour[7] = ["#9e9e9e", "#8c564b", "#e377c2", "#ff7f0e", "#1f77b4", "#2ca02c", "#d62728"]
set grid ytics lc rgb "#dddddd" lw 1 dt 1
set border 3
set xtics nomirror
set ytics nomirror
