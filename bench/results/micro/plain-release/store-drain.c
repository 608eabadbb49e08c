/* The 4 KiB overwrite's pattern without a file system (bench/results/micro/plain-release/README.md):
 * 200,000 random 4 KiB overwrites by streaming stores of a 1 GiB range of a 4 GiB file on
 * /dev/shm, each timed, median per mode, three rounds. Modes: the limit (stores, sfence);
 * inside a spin lock released by a locked cmpxchg (rmw) or a plain store (plain); with one
 * random 8-byte load of a 32 MiB table (the lookup) inside the lock or before it; and
 * ordinary stores with clwb instead of streaming stores.
 * Build and run: gcc -O2 -mavx512f -mclwb -o store-drain store-drain.c && ./store-drain */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
static inline uint64_t now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
static void nt4k(char*d,const char*s){for(int i=0;i<4096;i+=64){__m512i v=_mm512_loadu_si512(s+i);_mm512_stream_si512((void*)(d+i),v);}}
static volatile uint32_t lk;
static int cmp(const void*a,const void*b){uint64_t x=*(uint64_t*)a,y=*(uint64_t*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t img=(size_t)4<<30; int fd=open("/dev/shm/owexp",O_RDWR|O_CREAT,0600); ftruncate(fd,img);
  char*m=mmap(0,img,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,0);
  size_t nblk=img/4096; size_t tbl_slots=nblk; uint64_t*tbl=(uint64_t*)m; /* table = first 32MiB (8B slots) */
  char src[4096] __attribute__((aligned(64))); memset(src,0x5a,4096);
  int N=200000; uint64_t*off=malloc(N*8),*ts=malloc(N*8);
  srand(1); for(int i=0;i<N;i++) off[i]=(8192+ (rand()%262144))*4096ull; /* 1GiB file region */
  const char*names[]={"limit","lock-rmw-release","lock-plain-release","lookup+rmw (cur)","lookup-before+plain","memcpy+clwb rmw","memcpy+clwb plain","lookup-in+plain","lookup-before(pf)+rmw"};
  for(int round=0;round<3;round++)
  for(int mode=0;mode<9;mode++){
    for(int i=0;i<N;i++){
      uint64_t t0=now(); char*d=m+off[i];
      if(mode==0){nt4k(d,src);_mm_sfence();}
      else if(mode==1){while(__sync_val_compare_and_swap(&lk,0,1));nt4k(d,src);_mm_sfence();__sync_val_compare_and_swap(&lk,1,0);}
      else if(mode==2){while(__sync_val_compare_and_swap(&lk,0,1));nt4k(d,src);_mm_sfence();__atomic_store_n(&lk,0,__ATOMIC_RELEASE);}
      else if(mode==3){while(__sync_val_compare_and_swap(&lk,0,1));uint64_t s=tbl[(off[i]/4096*2654435761u)%tbl_slots]; d+= (s&1); nt4k(d,src);_mm_sfence();__sync_val_compare_and_swap(&lk,1,0);}
      else if(mode==5){while(__sync_val_compare_and_swap(&lk,0,1));memcpy(d,src,4096);for(int j=0;j<4096;j+=64)_mm_clwb(d+j);_mm_sfence();__sync_val_compare_and_swap(&lk,1,0);}
      else if(mode==6){while(__sync_val_compare_and_swap(&lk,0,1));memcpy(d,src,4096);for(int j=0;j<4096;j+=64)_mm_clwb(d+j);_mm_sfence();__atomic_store_n(&lk,0,__ATOMIC_RELEASE);}
      else if(mode==7){while(__sync_val_compare_and_swap(&lk,0,1));uint64_t s=tbl[(off[i]/4096*2654435761u)%tbl_slots]; d+=(s&1); nt4k(d,src);_mm_sfence();__atomic_store_n(&lk,0,__ATOMIC_RELEASE);}
      else if(mode==8){uint64_t s=tbl[(off[i]/4096*2654435761u)%tbl_slots]; d+=(s&1); while(__sync_val_compare_and_swap(&lk,0,1)); nt4k(d,src);_mm_sfence();__sync_val_compare_and_swap(&lk,1,0);}
      else {uint64_t s=tbl[(off[i]/4096*2654435761u)%tbl_slots]; d+=(s&1); while(__sync_val_compare_and_swap(&lk,0,1)); nt4k(d,src);_mm_sfence();__atomic_store_n(&lk,0,__ATOMIC_RELEASE);}
      ts[i]=now()-t0;
    }
    qsort(ts,N,8,cmp); printf("round %d %-22s median %4lu ns p99 %lu\n",round,names[mode],ts[N/2],ts[N*99/100]);
  }
  unlink("/dev/shm/owexp");
}
