/* xcore.c: what a page costs the backend's core after another core has read it (tpch-intel-huge-cold-20261128; gcc -O2 -march=native -pthread -o xcore xcore.c && ./xcore) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#define PG 8192
#define BATCH 32
static char *a; static unsigned *ord; static size_t np;
static atomic_long go = -1, done = -1;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static uint64_t readpage(const char *p){const uint64_t*w=(const uint64_t*)p;uint64_t x=0;for(int i=0;i<PG/8;i++)x^=w[i]*(i|1);return x;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static volatile uint64_t sink;
static void *helper(void *x){pin(1);long b;for(;;){while((b=atomic_load(&go))==atomic_load(&done))if(b==-2)return 0; if(b==-2)return 0;
  uint64_t s=0;for(int i=0;i<BATCH;i++)s+=readpage(a+(size_t)ord[b*BATCH+i]*PG);sink=s;atomic_store(&done,b);}}
int main(){
  size_t n=(size_t)1<<30; a=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); memset(a,3,n);
  np=n/PG; ord=malloc(np*4); for(size_t i=0;i<np;i++)ord[i]=i; srand(2); for(size_t i=np-1;i>0;i--){size_t j=rand()%(i+1);unsigned t=ord[i];ord[i]=ord[j];ord[j]=t;}
  pin(0); pthread_t t; pthread_create(&t,0,helper,0);
  long nb=np/BATCH; double tm[3]={0}; long cnt[3]={0};
  for(long b=0;b<nb;b++){ int mode=b%3; uint64_t s=0;
    if(mode==1){atomic_store(&go,b); while(atomic_load(&done)!=b);}          /* helper read it first */
    if(mode==2){for(int i=0;i<BATCH;i++)s+=readpage(a+(size_t)ord[b*BATCH+i]*PG);} /* we read it first */
    double t0=now(); for(int i=0;i<BATCH;i++)s+=readpage(a+(size_t)ord[b*BATCH+i]*PG); tm[mode]+=now()-t0; cnt[mode]+=BATCH; sink=s; }
  atomic_store(&go,-2); atomic_store(&done,-2);
  printf("ns per 8 kB page read by core 0: from memory %.0f | after core 1 read it %.0f | after core 0 read it %.0f\n",
    tm[0]/cnt[0]*1e9, tm[1]/cnt[1]*1e9, tm[2]/cnt[2]*1e9);
  return 0;}
