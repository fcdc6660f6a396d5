# trace-writes.py PERF_SCRIPT_TXT OPCODE PROCESS: for each log write (an
# io_uring submission of OPCODE by PROCESS), its completion, and the time
# from that completion to the next such submission (us).
import re,sys,statistics as st
op=sys.argv[2]; who=sys.argv[3]
events=[]
for l in open(sys.argv[1]):
    m=re.search(r'\s(\d+\.\d+):\s+(\S+):',l)
    if m:
        events.append((float(m.group(1))*1e6,m.group(2),l))
pending={}  # io_uring request address -> its row in rows
rows=[]     # [submitted, completed]
for t,e,l in events:
    if e=='io_uring:io_uring_submit_req' and ('opcode %s,' % op) in l and (who in l):
        pending[re.search(r'req (\S+),',l).group(1)]=len(rows)
        rows.append([t,None])
    elif e=='io_uring:io_uring_complete':
        i=pending.pop(re.search(r'req (\S+),',l).group(1),None)
        if i is not None:
            rows[i][1]=t
rows=[r for r in rows if r[1]]
dur=[c-s for s,c in rows]
gap=[rows[i+1][0]-rows[i][1] for i in range(len(rows)-1)]
print("writes",len(rows),"submit->complete p50 %.0f mean %.0f"%(st.median(dur),st.mean(dur)),"complete->next submit p50 %.0f mean %.0f"%(st.median(gap),st.mean(gap)))
