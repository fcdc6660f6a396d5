import csv,sys,statistics,collections
# cpu.py file.csv...: server CPU per op medians per target and read%
d=collections.defaultdict(list); sy=collections.defaultdict(list); ops=collections.defaultdict(list)
for f in sys.argv[1:]:
    for r in csv.DictReader(open(f)):
        if not r['server_cpu_us_per_op']: continue
        k=(r['target'],int(r['read_pct']),r.get('outstanding',''))
        d[k].append(float(r['server_cpu_us_per_op'])); sy[k].append(float(r['server_sys_us_per_op'] or 0)); ops[k].append(float(r['ops_per_s']))
for k in sorted(d, key=lambda k:(k[1],k[2],k[0])):
    print(f"{k[0]:12s} {k[1]:4d}% o={k[2]:3s} cpu/op med {statistics.median(d[k]):6.2f} ({' '.join('%.2f'%x for x in d[k])}) sys {statistics.median(sy[k]):5.2f} ops {statistics.median(ops[k]):8.0f}")
