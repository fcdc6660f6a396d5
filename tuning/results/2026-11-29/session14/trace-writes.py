# trace-writes.py PERF_SCRIPT_TXT OPCODE PROCESS: for each log write (an
# io_uring submission of OPCODE by PROCESS), its completion, and the time
# from that completion to the next such submission (us).
import re,sys,statistics as st
op=sys.argv[2]; who=sys.argv[3]
subs=[];comps={}
lines=open(sys.argv[1]).read().splitlines()
ev=[]
for l in lines:
    m=re.search(r'\s(\d+\.\d+):\s+(\S+):',l)
    if not m: continue
    t=float(m.group(1))*1e6; e=m.group(2)
    ev.append((t,e,l))
pend={}
rows=[]
for t,e,l in ev:
    if e=='io_uring:io_uring_submit_req' and ('opcode %s,' % op) in l and (who in l):
        u=re.search(r'user_data (\S+),',l).group(1); r=re.search(r'req (\S+),',l).group(1)
        pend[r]=t; rows.append([t,None])
    elif e=='io_uring:io_uring_complete':
        r=re.search(r'req (\S+),',l).group(1)
        if r in pend:
            ts=pend.pop(r)
            for row in rows:
                if row[0]==ts: row[1]=t
rows=[r for r in rows if r[1]]
dur=[c-s for s,c in rows]
gap=[rows[i+1][0]-rows[i][1] for i in range(len(rows)-1)]
print("writes",len(rows),"submit->complete p50 %.0f mean %.0f"%(st.median(dur),st.mean(dur)),"complete->next submit p50 %.0f mean %.0f"%(st.median(gap),st.mean(gap)))
