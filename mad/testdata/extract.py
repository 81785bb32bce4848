"""extract.py IN OUT [N]: the last (or the Nth, from 0) MAD an infiniband-diags -dd run dumped.

The SMP and PMA tools dump each answer after a "rcv buf" line, saquery
after "SA Response:"; both as lines of up to eight 16-bit hex words.
"""
import re
import sys

blocks, cur = [], None
for line in open(sys.argv[1], errors="replace").read().splitlines():
    s = line.strip()
    if s in ("rcv buf", "SA Response:"):
        cur = []
        blocks.append(cur)
    elif cur is not None and re.fullmatch(r"[0-9a-f]{4}( [0-9a-f]{4}){0,7}", s):
        cur.append(s)
    else:
        cur = None
pick = int(sys.argv[3]) if len(sys.argv) > 3 else -1
with open(sys.argv[2], "w") as f:
    f.write("\n".join(blocks[pick]) + "\n" if blocks else "")
