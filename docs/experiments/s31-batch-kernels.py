# Thirty-first session: each statistics batch of one job of a light trace
# (AMTOOL_BATCH_TRACE=2): its device, frames, first kernel's start and last
# kernel's end (ms from the job's start), kernel time, kernel spans (chunks)
# and kernel time per thousand frames.  Usage: s31-batch-kernels.py TRACE [REP]
import sys,re
f=sys.argv[1]
L=open(f).read().splitlines()
starts=[i for i,l in enumerate(L) if 'mark=start' in l]
B=[]
for i,l in enumerate(L):
    m=re.search(r'device=(\d) frames=(\d+) sent=([\d.]+)-([\d.]+) kernels=(\S+) collected=([\d.]+)',l)
    if m:
        spans=[tuple(float(x) for x in k.split('-')) for k in m.group(5).split(',')]
        B.append((i,int(m.group(1)),int(m.group(2)),spans))
rep=int(sys.argv[2]) if len(sys.argv)>2 else 2
lo=starts[rep]; hi=starts[rep+1] if rep+1<len(starts) else len(L)
t0=float(re.search(r'at=([\d.]+)',L[lo]).group(1))
for i,d,n,sp in B:
    if lo<i<hi:
        k=sum(b-a for a,b in sp)
        print(f"dev{d} {n:7d} start {sp[0][0]-t0:6.2f} end {sp[-1][1]-t0:6.2f} ker {k:.3f} chunks {len(sp)} us/kframe {1000*k/n*1000:.2f}")
