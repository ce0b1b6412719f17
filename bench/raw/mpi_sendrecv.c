// Plain MPI_Sendrecv ring bandwidth (no Origami): the baseline for docs/results-comm.md.
// Build and run: mpicc -O2 bench/raw/mpi_sendrecv.c -o /tmp/rawbw &&
//   mpirun --allow-run-as-root -np 2 --bind-to none --mca btl_vader_single_copy_mechanism cma /tmp/rawbw
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int c,char**v){MPI_Init(&c,&v);int r,n;MPI_Comm_rank(MPI_COMM_WORLD,&r);MPI_Comm_size(MPI_COMM_WORLD,&n);
for(long b=65536;b<=(64l<<20);b*=4){char*s=malloc(b),*d=malloc(b);for(long i=0;i<b;i++){s[i]=1;d[i]=0;}
int it=b>=(16<<20)?3:20; MPI_Sendrecv(s,b,MPI_BYTE,(r+1)%n,0,d,b,MPI_BYTE,(r-1+n)%n,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
MPI_Barrier(MPI_COMM_WORLD);double t=MPI_Wtime();for(int i=0;i<it;i++)MPI_Sendrecv(s,b,MPI_BYTE,(r+1)%n,0,d,b,MPI_BYTE,(r-1+n)%n,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
t=(MPI_Wtime()-t)/it;double m;MPI_Reduce(&t,&m,1,MPI_DOUBLE,MPI_MAX,0,MPI_COMM_WORLD);if(!r)printf("raw sendrecv %ld B %.1f us %.3f GB/s\n",b,m*1e6,b/m/1e9);free(s);free(d);}
MPI_Finalize();}
