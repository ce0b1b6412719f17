# PNG plots of strategies_bench's sweep CSV (columns: see bench/strategies_bench.cpp).
#   gnuplot -e "sweep='docs/results-strategies-sweep.csv'; outdir='docs/plots'" \
#           bench/plot_strategies.gp
# Figures are the rank-max of each strategy (the rank that needs most); "single / 4" is one
# device's peak divided by the degree, the bound TSP's peak is held to.
if (!exists("sweep")) sweep = 'docs/results-strategies-sweep.csv'
if (!exists("outdir")) outdir = 'docs/plots'
strategies = "single tp tpsp sp tpxsp tsp"
titles = "single TP TP-SP SP TP+SP(2x2) TSP"
rows(s, r) = sprintf("< awk -F, -v s=%s -v r=%s '$1==s && $5==r && $8==\"ok\"' %s", s, r, sweep)
MiB = 1048576.0

set datafile separator ","
set terminal pngcairo size 1000,420 font ",9"
set logscale x 2
set grid
set key top left
set xlabel "sequence length S (tokens)"
set style data linespoints

# --- per-rank peak memory vs S, one panel per recompute policy
set output outdir.'/strategies_memory.png'
set multiplot layout 1,2
set ylabel "peak bytes per rank, rank-max (MiB)"
do for [r in "none full"] {
  set title "recompute ".r
  plot for [i=1:words(strategies)] rows(word(strategies,i), r) using 3:($14/MiB) \
         title word(titles,i) lw 2, \
       rows("single", r) using 3:($14/MiB/4) title "single / 4" dt 2 lc black
}
unset multiplot

# --- per-category peaks at the longest swept S, stacked (the sum of category peaks can exceed
# the peak of the total: categories peak at different moments)
set output outdir.'/strategies_memory_categories.png'
unset logscale x
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set key inside top right
set xlabel "strategy"
set ylabel "peak per category, rank-max (MiB)"
maxs = system(sprintf("awk -F, 'NR>1 && $3>m {m=$3} END {print m}' %s", sweep))
set multiplot layout 1,2
do for [r in "none full"] {
  set title sprintf("recompute %s, S = %s", r, maxs)
  plot sprintf("< awk -F, -v r=%s -v s=%s '$5==r && $3==s && $8==\"ok\"' %s", r, maxs, sweep) \
         using ($16/MiB):xtic(1) title "parameters", \
       '' using ($17/MiB) title "gradients", '' using ($18/MiB) title "optimizer", \
       '' using ($19/MiB) title "activations", '' using ($20/MiB) title "comm buffers", \
       '' using ($21/MiB) title "workspace", '' using ($22/MiB) title "logits"
}
unset multiplot

# --- speed: tokens per CPU-second and per wall second vs S (recompute none)
set output outdir.'/strategies_speed.png'
set style data linespoints
set logscale x 2
set key top right
set xlabel "sequence length S (tokens)"
set multiplot layout 1,2
set title "tokens per CPU-second (whole process), recompute none"
set ylabel "tokens / CPU-s"
plot for [i=1:words(strategies)] rows(word(strategies,i), "none") using 3:13 title word(titles,i) lw 2
set title "tokens per wall second, recompute none (shared machine: noisy)"
set ylabel "tokens / s"
plot for [i=1:words(strategies)] rows(word(strategies,i), "none") using 3:11 title word(titles,i) lw 2
unset multiplot

# --- communication: bytes sent per rank and exposed (blocked-in-wait) seconds vs S
set output outdir.'/strategies_comm.png'
set key top left
set multiplot layout 1,2
set logscale y
set title "bytes sent per step, rank-max, recompute none"
set ylabel "MiB sent"
plot for [i=2:words(strategies)] rows(word(strategies,i), "none") using 3:($23/MiB) title word(titles,i) lw 2
set title "exposed communication per step, rank-max, recompute none"
set ylabel "seconds blocked in wait()"
plot for [i=2:words(strategies)] rows(word(strategies,i), "none") using 3:25 title word(titles,i) lw 2
unset multiplot
