#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  const char*path=argv[1]; size_t seg=16<<20; int chunk=atoi(argv[2]); int mode=atoi(argv[3]);
  int fd=open(path,O_RDWR|O_CREAT,0600); char*z=calloc(1,seg); pwrite(fd,z,seg,0); fsync(fd);
  double best=1e18;
  for(int r=0;r<20;r++){
    char*p=mmap(NULL,seg,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
    double t0=now();
    for(size_t off=0;off<seg;off+=chunk){
      if(mode==0){ if(madvise(p+off,chunk,MADV_POPULATE_WRITE)) {perror("madv");return 1;} }
      else { for(size_t o=0;o<chunk;o+=4096) p[off+o]=1; }
    }
    double t=now()-t0; if(t<best)best=t;
    munmap(p,seg);
  }
  printf("chunk %d %s: %.1f us per segment, %.2f us per call, %.3f us per page\n",chunk,mode?"fault":"populate",best/1e3,best/1e3/(seg/chunk),best/1e3/(seg/4096));
  unlink(path); return 0;}
