/* readfloor.c: the cost of reading an 8 kB page from memory in random order, with and without software prefetch (tpch-intel-huge-cold-20261128; gcc -O2 -march=native -o readfloor readfloor.c && taskset -c 0 ./readfloor 0 && taskset -c 0 ./readfloor 1) */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#define PG 8192
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline uint64_t readpage(const char *p){ const uint64_t *w=(const uint64_t*)p; uint64_t x=0; for(int i=0;i<PG/8;i++) x^=w[i]*(i|1); return x;}
static inline void pfpage(const char *p){ for(int i=0;i<PG;i+=64) __builtin_prefetch(p+i,0,3);}
int main(int argc,char**argv){
  size_t n=(size_t)1<<30; int huge=argc>1&&atoi(argv[1]);
  char*a=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(a,n,huge?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
  memset(a,7,n); size_t np=n/PG; unsigned *ord=malloc(np*4); for(size_t i=0;i<np;i++)ord[i]=i;
  srand(1); for(size_t i=np-1;i>0;i--){size_t j=rand()%(i+1);unsigned t=ord[i];ord[i]=ord[j];ord[j]=t;}
  char *flush=malloc(64<<20);
  for(int rep=0;rep<3;rep++) for(int mode=0;mode<4;mode++){
    memset(flush,rep,64<<20);
    uint64_t s=0; double t0=now();
    for(size_t i=0;i<np;i++){ const char*p=a+(size_t)ord[i]*PG;
      if(mode==1) pfpage(p);
      if(mode==2 && i+1<np) pfpage(a+(size_t)ord[i+1]*PG);
      if(mode==3){ if(i==0) pfpage(p); if(i+1<np) pfpage(a+(size_t)ord[i+1]*PG);} 
      s+=readpage(p);}
    double t=now()-t0; printf("huge=%d mode=%d (%s) %.0f ns/page %lu\n",huge,mode,
      mode==0?"plain":mode==1?"pf self":mode==2?"pf next":"pf self+next", t/np*1e9,(unsigned long)(s&1));
  }
}
