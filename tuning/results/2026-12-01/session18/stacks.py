import collections,sys,re
samples=[];cur=None
for l in open(sys.argv[1]):
    if not l.strip():
        if cur is not None: samples.append(cur); cur=None
        continue
    if not l.startswith('\t') and not l.startswith(' '):
        cur=[]; continue
    p=l.strip().split(None,1)
    if len(p)==2 and cur is not None:
        cur.append(re.sub(r'\+0x[0-9a-f]+ \(.*\)$','',p[1]).replace(' (inlined)',''))
if cur: samples.append(cur)
N=len(samples); print("samples",N)
def under(fn):
    c=collections.Counter(); n=0
    for s in samples:
        idx=[i for i,f in enumerate(s) if fn in f]
        if not idx: continue
        n+=1; i=idx[-1]
        ch = s[i-1] if i>=1 else '(self)'
        c[ch[:100]]+=1
    print(f"== {fn}: {100*n/N:.2f}%")
    for k,v in c.most_common(12): print(f"   {100*v/N:5.2f}% {k}")
for fn in sys.argv[2:]: under(fn)
