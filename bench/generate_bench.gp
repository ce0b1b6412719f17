# gnuplot -e "prefix='docs/inference'" bench/generate_bench.gp  (after generate_bench)
if (!exists("prefix")) prefix = 'docs/inference'
set datafile separator ','
set terminal pngcairo size 800,500
set key top left
set grid
set output prefix.'-prefill.png'
set title 'Prefill: peak memory per rank (D = 4; tp includes the same head-sharded KV cache)'
set xlabel 'prompt tokens'
set ylabel 'MiB per rank'
set logscale x 2
plot prefix.'-prefill.csv' using 1:2 skip 1 with linespoints title 'tsp', \
     '' using 1:3 skip 1 with linespoints title 'tp', \
     '' using 1:4 skip 1 with linespoints title 'single device'
set output prefix.'-decode.png'
set title 'Decode throughput per batch size (threads transport, shared 2-core machine)'
set xlabel 'sequences in the batch'
set ylabel 'tokens/s'
plot prefix.'-decode.csv' using 1:($2==1?$3:1/0) skip 1 with linespoints title 'D = 1', \
     '' using 1:($2>1?$3:1/0) skip 1 with linespoints title 'D = 4 (tsp shards, tensor-parallel decode)'
