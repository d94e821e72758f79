/* How a waiting rank should get out of the way of the rank it waits for, on fewer cores than
 * ranks: the 4-rank small bcast of collops's `shm_direct`, stripped to its waits.
 *
 * N processes (forked; they die with the parent) run `iterations` rounds of a barrier and a
 * bcast of one word from rank 0, and print the mean µs per bcast on each rank. Mode 0 waits
 * as collops's compiled runner does (spin 2 µs, then sched_yield); mode 1 futex-sleeps
 * instead of yielding when the rank it waits for last published the CPU it is on itself (the
 * root then runs at once, but must wake the sleepers); mode 2 waits as mode 0 and has the root
 * yield once after publishing (collops's `hand_over_core`). `pin` 1 places ranks 0..N/2-1 on CPU
 * 0 and the others on CPU 1 (the root shares its core with a waiter), 0 leaves placement to
 * the scheduler, as `collops bench` does.
 *
 *   gcc -O2 -o /tmp/placement_wait benchmarks/placement_wait.c
 *   /tmp/placement_wait 4 MODE PIN 20000
 *
 * On the development VM (2026-11-25, Linux 6.18): mode 0 6.8 µs pinned and unpinned; mode 1
 * 2.6-5.8 pinned, 7.6-9.6 unpinned (futex wake-ups cost an IPI here), not adopted; mode 2
 * 2.2 pinned, 2.5-3.0 unpinned, adopted.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define LOAD(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
/* words: [0] barrier counter, [8] bcast seq, [16+8r] cpu of r, [64+8r] sleeping r, [128+8r] doorbell r (u32 futex) */
static uint64_t *W;
static int N, mode;
static void futex_wait(uint64_t *a, uint32_t v){struct timespec ts={0,200000};syscall(SYS_futex,(uint32_t*)a,FUTEX_WAIT,v,&ts,0,0);}
static void futex_wake(uint64_t *a){syscall(SYS_futex,(uint32_t*)a,FUTEX_WAKE,1<<30,0,0,0);}
static void wait_for_m(uint64_t *word, uint64_t v, int me, int awaited, int mode);
static void wait_for(uint64_t *word, uint64_t v, int me, int awaited) { wait_for_m(word, v, me, awaited, mode); }
static void wait_for_m(uint64_t *word, uint64_t v, int me, int awaited, int mode) {
  unsigned s=0; double stop=0;
  while (LOAD(word)<v){ __builtin_ia32_pause(); if((++s&63)==0){double t=now(); if(!stop)stop=t+2e-6; else if(t>stop)break;} }
  while (LOAD(word)<v) {
    if (mode==1 && (int)LOAD(&W[16+awaited]) == sched_getcpu()) {
      uint32_t bell=(uint32_t)LOAD(&W[128+me]); STORE(&W[64+me],1); __atomic_thread_fence(__ATOMIC_SEQ_CST);
      if (LOAD(word)<v) futex_wait(&W[128+me], bell);
      STORE(&W[64+me],0);
    } else sched_yield();
  }
}
static void wake_all(int me){ __atomic_thread_fence(__ATOMIC_SEQ_CST); for(int r=0;r<N;r++) if(r!=me && LOAD(&W[64+r])){ __atomic_fetch_add(&W[128+r],1,__ATOMIC_SEQ_CST); futex_wake(&W[128+r]); } }
int main(int argc,char**argv){N=atoi(argv[1]);mode=atoi(argv[2]);int pin=atoi(argv[3]);int iters=atoi(argv[4]);
 W=mmap(0,8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);memset(W,0,8192);
 double*res=(double*)(W+512);
 for(int me=0;me<N;me++){ if(fork()==0){ prctl(PR_SET_PDEATHSIG, SIGKILL);
   if(pin){cpu_set_t c;CPU_ZERO(&c);CPU_SET(me<N/2?0:1,&c);sched_setaffinity(0,sizeof c,&c);}
   double tot=0;
   for(int it=0;it<iters;it++){
     /* barrier: counter; last arrival wakes */
     uint64_t target=(uint64_t)N*(it+1); STORE(&W[16+me],(uint64_t)sched_getcpu());
     __atomic_fetch_add(&W[0],1,__ATOMIC_SEQ_CST);
     wait_for_m(&W[0],target,me, (me+1)%N, 0);
     double t=now();
     STORE(&W[16+me],(uint64_t)sched_getcpu());
     if(me==0){ STORE(&W[8],(uint64_t)it+1); wake_all(me); if (mode==2) sched_yield(); } else wait_for(&W[8],(uint64_t)it+1,me,0);
     tot+=now()-t;
   }
   res[me]=tot/iters*1e6; _exit(0);} }
 for(int i=0;i<N;i++)wait(0);
 printf("N=%d mode=%d pin=%d per-rank us:",N,mode,pin);double a=0;for(int i=0;i<N;i++){printf(" %.2f",res[i]);a+=res[i];}printf("  avg %.2f\n",a/N);}
