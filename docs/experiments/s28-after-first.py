import sys,re,subprocess
f=sys.argv[1]
out=subprocess.run(['python3',__import__('os').path.join(__import__('os').path.dirname(__file__),'s28-tsum.py'),f],capture_output=True,text=True).stdout
rep=None;firsts=[]
for l in out.splitlines():
    m=re.match(r'rep (\d+) total ([\d.]+)',l)
    if m: rep=int(m.group(1)); tot=float(m.group(2)); firsts=[]; continue
    m=re.search(r'dev(\d): batches (\d+) first ([\d.]+) last ([\d.]+) kernels ([\d.]+) idle ([\d.]+)',l)
    if m and rep:
        firsts.append((float(m.group(3)),float(m.group(4)),float(m.group(5)),float(m.group(6))))
        if len(firsts)==2:
            f0=min(x[0] for x in firsts)
            print(f.split('/')[-1],'rep',rep,'total %.2f'%tot,'after-first %.2f'%(tot-f0), ' '.join('f%.2f k%.2f i%.2f'%(x[0],x[2],x[3]) for x in firsts))
