# gnuplot bench/plot_bf16_loss.gp  (after bench/bf16_loss_curve.sh wrote the CSV)
set datafile separator ','
set terminal pngcairo size 800,500
set output 'docs/plots/bf16_loss.png'
set title 'Default job on one device: loss per step, fp32 and bf16 (--precision)'
set xlabel 'step'
set ylabel 'loss'
set y2label 'bf16 / fp32 - 1 (%)'
set y2tics
set ytics nomirror
set grid
set key top right
plot 'docs/results-bf16-loss.csv' using 1:2 skip 1 with lines lw 2 title 'fp32', \
     '' using 1:3 skip 1 with lines lw 2 title 'bf16', \
     '' using 1:(100*$4) skip 1 axes x1y2 with lines dt 2 title 'relative difference (right axis)'
