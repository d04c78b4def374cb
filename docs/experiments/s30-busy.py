# Copying threads busy per 0.25 ms, by batch size, in one job of a full trace
# (AMTOOL_BATCH_TRACE=1): s30-busy.py TRACE REP UNTIL_MS
import sys,re,collections
f=sys.argv[1]; rep=int(sys.argv[2]); lim=float(sys.argv[3])
L=open(f).read().splitlines()
starts=[i for i,l in enumerate(L) if 'mark=start' in l]
i0=starts[rep]; i1=starts[rep+1] if rep+1<len(starts) else len(L)
t0=float(re.search(r'at=([\d.]+)',L[i0]).group(1))
cur={}; spans=[]
for l in L[i0:i1]:
    m=re.search(r'mark=([pP])(\d+)\.(\d+)@(\S+) at=([\d.]+)',l)
    if m:
        t=float(m.group(5))-t0; th=m.group(4)
        if m.group(1)=='p': cur[th]=(t,int(m.group(2)),int(m.group(3)))
        elif th in cur: s=cur.pop(th); spans.append((s[0],t,s[1],s[2],th))
    m=re.search(r'mark=([wfc])@(\S+) at=([\d.]+)',l)
# busy per 0.25ms
for b in range(int(lim/0.25)):
    a=b*0.25; e=a+0.25
    busy=sum(max(0,min(e,s[1])-max(a,s[0])) for s in spans)/0.25
    byb=collections.Counter()
    for s in spans:
        ov=max(0,min(e,s[1])-max(a,s[0]))
        if ov>0: byb[s[2]]+=ov/0.25
    print('%.2f-%.2f busy %.1f  '%(a,e,busy)+' '.join('%dk:%.1f'%(k//1000,v) for k,v in sorted(byb.items())))
