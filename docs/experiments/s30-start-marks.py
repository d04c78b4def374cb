# A bench job's marks and batch lines from a batch trace (AMTOOL_BATCH_TRACE=1|2),
# times from the job's start: s30-start-marks.py TRACE REP [UNTIL_MS]
import sys,re
f=sys.argv[1]; rep=int(sys.argv[2]); lim=float(sys.argv[3]) if len(sys.argv)>3 else 3.0
L=open(f).read().splitlines()
starts=[i for i,l in enumerate(L) if 'mark=start' in l]
i0=starts[rep]; i1=starts[rep+1] if rep+1<len(starts) else len(L)
t0=float(re.search(r'at=([\d.]+)',L[i0]).group(1))
for l in L[i0:i1]:
    if 'batch:' not in l: continue
    s=l.split('batch: ',1)[1]
    m=re.search(r'mark=(\S+) at=([\d.]+)',s)
    if m:
        t=float(m.group(2))-t0
        if t<=lim and not re.match(r'(w|f|c)@',m.group(1)): print('%.3f %s'%(t,m.group(1)))
    else:
        # batch line: shift times
        def sh(mm): return '%.3f'%(float(mm.group(0))-t0)
        s2=re.sub(r'\d{3,}\.\d+',sh,s)
        print('   ',s2[:220])
