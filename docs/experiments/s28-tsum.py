import sys,re
# Summarise a light batch trace: per e2e rep and device: first kernel start, last end,
# kernel time (sum of batch spans), idle between batches, 262k-batch span stats over time.
f=sys.argv[1]
L=open(f).read().splitlines()
starts=[i for i,l in enumerate(L) if 'mark=start' in l]
ends=[i for i,l in enumerate(L) if 'mark=end' in l]
B=[]
for l in L:
    m=re.search(r'device=(\d) frames=(\d+) sent=([\d.]+)-([\d.]+) kernels=(\S+) collected=([\d.]+) downloaded=([\d.na]+)',l)
    if m:
        spans=[tuple(float(x) for x in k.split('-')) for k in m.group(5).split(',')]
        B.append((int(m.group(1)),int(m.group(2)),float(m.group(3)),float(m.group(4)),spans,float(m.group(6))))
for rep in range(len(starts)):
    t0=float(re.search(r'at=([\d.]+)',L[starts[rep]]).group(1)); t1=float(re.search(r'at=([\d.]+)',L[ends[rep]]).group(1))
    print(f"rep {rep} total {t1-t0:.2f} ms")
    per={}
    for d,n,s0,s1,sp,c in B:
        if t0<=s0<=t1: per.setdefault(d,[]).append((sp[0][0]-t0,sp[-1][1]-t0,n,s0-t0,s1-t0,c-t0))
    for d in sorted(per):
        s=sorted(per[d]); ker=sum(b-a for a,b,*_ in s); idle=sum(max(0,s[i+1][0]-s[i][1]) for i in range(len(s)-1))
        full=[b-a for a,b,n,*_ in s if n>=261000]
        q=len(full)//4 or 1
        big=[(i,s[i+1][0]-s[i][1]) for i in range(len(s)-1) if s[i+1][0]-s[i][1]>0.05]
        print(f"  dev{d}: batches {len(s)} first {s[0][0]:.2f} last {s[-1][1]:.2f} kernels {ker:.2f} idle {idle:.2f} | full batch ms first-q {sum(full[:q])/q:.3f} last-q {sum(full[-q:])/q:.3f} | gaps>0.05: {len(big)} sum {sum(g for _,g in big):.2f} | end after last kernel {t1-t0-s[-1][1]:.2f}")
        if big: print("     gaps at:", " ".join(f"{s[i][1]:.1f}+{g:.2f}(sent-lag {s[i+1][4]-s[i][1]:+.2f})" for i,g in big[:12]))
