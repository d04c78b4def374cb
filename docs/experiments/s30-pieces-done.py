# Pieces copied by each time, and a piece's fill/wait/copy by when it began,
# in one job of a full trace (AMTOOL_BATCH_TRACE=1): s30-pieces-done.py TRACE REP
import sys,re
f=sys.argv[1]; rep=int(sys.argv[2])
L=open(f).read().splitlines()
starts=[i for i,l in enumerate(L) if 'mark=start' in l]
i0=starts[rep]; i1=starts[rep+1] if rep+1<len(starts) else len(L)
t0=float(re.search(r'at=([\d.]+)',L[i0]).group(1))
cur={}; spans=[]; fills=[]
for l in L[i0:i1]:
    m=re.search(r'mark=([pPwfc])(\d*)\.?(\d*)@(\S+) at=([\d.]+)',l)
    if not m: continue
    t=float(m.group(5))-t0; th=m.group(4); k=m.group(1)
    if k=='p': cur[th]={'p':t,'b':int(m.group(2))}
    elif th in cur: cur[th][k]=t
    if k=='P' and th in cur: spans.append(cur.pop(th))
ends=sorted(s['P'] for s in spans)
for t in [1.0,1.25,1.5,1.75,2.0,2.25,2.5,2.75,3.0,3.5,4.0,5,6,7,8]:
    n=sum(1 for e in ends if e<=t)
    print('t=%.2f pieces done %d (~%d MB)'%(t,n,n*2))
import statistics
for a,b in [(1.0,2.0),(2.0,3.0),(3.0,5.0),(5.0,8.0)]:
    ss=[s for s in spans if a<=s['p']<b and 'f' in s and 'w' in s]
    if ss: print('start in [%g,%g): n=%d fill %.3f wait %.3f copy %.3f'%(a,b,len(ss),statistics.mean(s['f']-s['w'] for s in ss),statistics.mean(s['w']-s['p'] for s in ss),statistics.mean(s.get('c',s['f'])-s['f'] for s in ss)))
