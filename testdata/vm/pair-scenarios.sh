# The two-guest scenarios, run in this order in one boot of the pair (busybox
# ash, on both guests in step).
#
#   pair_scenario NAME [--key value]... [-- PEER-TEST-ARGS...]
#
# Node a (192.0.2.1) is the client, node b (192.0.2.2) the server; each
# scenario starts from the healthy pair (eth0 MTU 1500, no qdisc, rxe0
# ACTIVE) and the harness restores it afterwards on both guests.
#
# What the guests act on:
#   --serve 'CMD'       node b's server (default: rdmadoctor peer serve on
#                       192.0.2.2:18516, once); none: nobody listens
#   --port P            the TCP port node b waits for before a may go
#   --client 'CMD'      node a's command (default: rdmadoctor peer test
#                       192.0.2.2:18516 PEER-TEST-ARGS)
#   --runs N            run server and client N times (medians of the tools)
#   --a-break / --b-break 'SHELL'   run on that node before
#   --b-during 'SHELL' --b-after S  run on node b S seconds after a went
# What the host asserts (testdata/vm/rdvm): --needs, --exit, --root,
# --status, --mentions as in scenarios.sh, on node a's report; and
#   --kind ref NAME     a reference tool: each run exited 0; its figures
#                       go into the comparison table
#   --server-exit N     node b's server exit status
#   --server-log WORD   node b's server output names WORD
#   --same-resources 1  `rdma -j resource` counts on both nodes after the
#                       scenario equal those before it
#   --max-seconds S     node a's command took at most S s (median)

# The reference tools first, between the same guests: rdma-core's RC
# pingpong (SEND/RECV round trips) and perftest's SEND bandwidth and RDMA
# WRITE latency, over the RoCE v2 GID of the IPv4 address (index 1).
pair_scenario ref-rc-pingpong --kind ref --runs 3 --port 18515 \
	--serve 'ibv_rc_pingpong -d rxe0 -g 1 -s 1024 -n 500' \
	--client 'ibv_rc_pingpong -d rxe0 -g 1 -s 1024 -n 500 192.0.2.2'

pair_scenario ref-send-bw --kind ref --runs 3 --port 18515 \
	--serve 'ib_send_bw -d rxe0 -x 1 -s 65536 -n 200 -F' \
	--client 'ib_send_bw -d rxe0 -x 1 -s 65536 -n 200 -F 192.0.2.2'

pair_scenario ref-write-lat --kind ref --runs 3 --port 18515 \
	--serve 'ib_write_lat -d rxe0 -x 1 -s 64 -n 500 -F' \
	--client 'ib_write_lat -d rxe0 -x 1 -s 64 -n 500 -F 192.0.2.2'
