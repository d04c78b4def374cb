"""Twenty-eighth session: the copying threads in a full batch trace
(AMTOOL_BATCH_TRACE=1), per job after the first.
  busy:  threads filling a piece in each 0.1 ms of the job's first 4 ms
  split: a piece's time summed over the job: p-w (waiting for its buffer),
         w-f (filling it), f-c (the copy call), c-P (the rest)
usage: s28-trace-pieces.py busy|split TRACE"""
import collections, re, sys

def jobs(path):
    """Each job's piece marks: (ms since its start, kind, thread)."""
    out, cur = [], None
    for l in open(path).read().splitlines():
        m = re.search(r'mark=(\S+) at=([\d.]+)', l)
        if not m:
            continue
        name, at = m.group(1), float(m.group(2))
        if name == 'start':
            cur = [at, []]
            out.append(cur)
            continue
        m2 = re.match(r'([pPwfc])(?:\d+\.\d+)?@(\S+)', name)
        if cur is not None and m2:
            cur[1].append((at - cur[0], m2.group(1), m2.group(2)))
    return out[1:]

def busy(ev):
    active, spans = {}, []
    for t, k, th in sorted(ev):
        if k == 'p':
            active[th] = t
        elif k == 'P' and th in active:
            spans.append((active.pop(th), t))
    cells = [sum(max(0, min(z, e) - max(a, s)) for s, e in spans) / 0.1
             for a, z in ((b * 0.1, (b + 1) * 0.1) for b in range(40))]
    return " ".join(f"{c:4.1f}" for c in cells)

def split(ev):
    st, acc, n = {}, collections.defaultdict(float), 0
    for t, k, th in ev:
        if k == 'p':
            st[th] = {'p': t}
        elif th in st:
            st[th][k] = t
        if k == 'P' and th in st:
            s = st.pop(th)
            if all(x in s for x in 'pwfc'):
                n += 1
                for a, b in (('p', 'w'), ('w', 'f'), ('f', 'c')):
                    acc[f'{a}-{b}'] += s[b] - s[a]
                acc['c-P'] += t - s['c']
    return f"n={n} " + " ".join(f"{k} {v:.1f}ms (avg {v / max(n, 1) * 1000:.0f}us)" for k, v in acc.items())

mode, path = sys.argv[1], sys.argv[2]
for i, (_, ev) in enumerate(jobs(path), 1):
    print(f"job{i}", (busy if mode == 'busy' else split)(ev))
